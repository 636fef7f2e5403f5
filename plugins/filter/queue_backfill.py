"""The queue_backfill filters (gpushare.gpu_sharing.<name>), each documented in <name>.yml beside this file; their
code: gpushare.kueue.filters."""

from gpushare.kueue.filters import FILTERS


class FilterModule:
    def filters(self) -> dict:
        return dict(FILTERS)
