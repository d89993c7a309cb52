"""Dask clusters for the commands that fan out independent tasks (``scoville explore``,
``scoville regress``): a local cluster of N worker processes, or an existing scheduler."""

from __future__ import annotations

__all__ = ["ClusterError", "close_client", "open_client"]


class ClusterError(ValueError):
    """A bad ``--workers`` / ``--dask`` choice, or a scheduler that does not answer: one
    line."""


def open_client(workers: int | None, address: str | None):
    """A ``dask.distributed.Client``: on a new local cluster of ``workers`` single-threaded
    processes, or connected to the scheduler at ``address``; None when neither is given."""
    if workers is not None and address:
        raise ClusterError("give --workers or --dask, not both")
    if workers is not None:
        if workers < 1:
            raise ClusterError("--workers must be at least 1")
        from dask.distributed import Client, LocalCluster

        return Client(LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                   dashboard_address=None))
    if address:
        from dask.distributed import Client

        try:
            return Client(address, timeout=10)
        except OSError as err:
            raise ClusterError(f"--dask {address}: cannot connect ({err})") from None
    return None


def close_client(client) -> None:
    """Close ``client`` and the local cluster it started, if any."""
    if client is None:
        return
    cluster = getattr(client, "cluster", None)
    client.close()
    if cluster is not None:
        cluster.close()
