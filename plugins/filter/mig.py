"""The mig filters (gpushare.gpu_sharing.<name>), each documented in <name>.yml beside this file; their code:
gpushare.mig.filters."""

from gpushare.mig.filters import FILTERS


class FilterModule:
    def filters(self) -> dict:
        return dict(FILTERS)
