"""The time-slicing rollback filters (gpushare.gpu_sharing.<name>), each documented in <name>.yml beside
this file; their code: gpushare.timeslicing_rollback.filters."""

from gpushare.timeslicing_rollback.filters import FILTERS


class FilterModule:
    def filters(self) -> dict:
        return dict(FILTERS)
