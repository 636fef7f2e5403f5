"""The share_check role's filters; they live in gpushare.share_check.filters."""

from gpushare.share_check.filters import FILTERS


class FilterModule:
    def filters(self) -> dict:
        return dict(FILTERS)
