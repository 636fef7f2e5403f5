"""Every check `gpushare_wait` can poll, by name."""

from __future__ import annotations

from gpushare.dra import checks as dra
from gpushare.kueue import checks as kueue
from gpushare.mig import checks as mig
from gpushare.rollout import checks as rollout
from gpushare.runbook import checks as runbook
from gpushare.share_check import checks as share_check
from gpushare.timeslicing import checks as timeslicing
from gpushare.timeslicing_rollback import checks as timeslicing_rollback

CHECKS = {**runbook.CHECKS, **timeslicing.CHECKS, **timeslicing_rollback.CHECKS, **kueue.CHECKS, **share_check.CHECKS,
          **mig.CHECKS, **rollout.CHECKS, **dra.CHECKS}
