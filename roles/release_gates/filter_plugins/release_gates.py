"""The release_gates role's filters; they live in gpushare.release_gates.filters."""

from gpushare.release_gates.filters import FILTERS


class FilterModule:
    def filters(self) -> dict:
        return dict(FILTERS)
