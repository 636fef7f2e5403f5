"""The rollout filters (gpushare.gpu_sharing.<name>), each documented in <name>.yml beside this file; their code:
gpushare.rollout.filters."""

from gpushare.rollout.filters import FILTERS


class FilterModule:
    def filters(self) -> dict:
        return dict(FILTERS)
