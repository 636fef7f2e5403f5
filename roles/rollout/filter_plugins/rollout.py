"""The rollout role's filters; they live in gpushare.rollout.filters."""

from gpushare.rollout.filters import FILTERS


class FilterModule:
    def filters(self) -> dict:
        return dict(FILTERS)
