"""Every check `gpushare_wait` can poll, by name."""

from __future__ import annotations

from gpushare.mig import checks as mig
from gpushare.timeslicing import checks as timeslicing

CHECKS = {**timeslicing.CHECKS, **mig.CHECKS}
