"""Documentation of the gpushare_lock action (the code: plugins/action/gpushare_lock.py)."""

DOCUMENTATION = r"""
module: gpushare_lock
short_description: Take the runbook lock and hold it while the run lives, or release it
version_added: 0.1.0
description:
  - "O(state=held): applies O(take), the changes the C(gpushare_lock) filter computed in the preflight (a create of the
    Lease, or a replace of a Lease whose holder is gone, at the version read), then starts the Lease's renewer, a
    detached process (C(python -m gpushare.runbook.renewer)) that renews C(spec.renewTime) every third of the Lease's
    duration while this run's ansible-playbook process lives, releases the Lease when that process ends without
    having released it (a killed run), and stops when the Lease is gone or another holder's. Until its first
    renewal is due it makes no request, unless that process ended without releasing the Lease."
  - "O(state=released): deletes the Lease if O(holder) still holds it, at the version read (a renewal in between is
    read again), then tells this run's renewer (O(renewer)) to stop (SIGTERM, only once its command line shows it is
    the renewer of O(holder)'s Lease): it ends without a request. With an empty O(holder) (this run took no lock) it
    does nothing."
  - The renewer writes only with C(update) at the version it read, so the runbook identity needs on the Lease exactly
    C(create), C(get), C(update) and C(delete) (deploy/rbac/05-records.yaml).
author: gpushare platform team (!UNKNOWN)
options:
  name:
    description: The Lease's name.
    type: str
    required: true
  namespace:
    description: The Lease's namespace.
    type: str
    required: true
  holder:
    description: The holder identity this run takes the Lease as, or releases it as.
    type: str
    default: ""
  state:
    description: V(held) to take the lock, V(released) to release it.
    type: str
    choices: [held, released]
    required: true
  take:
    description: With V(held), the C(take) changes of the C(gpushare_lock) filter (gpushare_apply changes).
    type: list
    elements: dict
    default: []
  renewer:
    description: With V(released), the pid of this run's renewer (RV(renewer) of V(held)); V(0) for none.
    type: int
    default: 0
extends_documentation_fragment:
  - gpushare.gpu_sharing.actions
attributes:
  check_mode:
    support: full
    description: The take is a server-side dry run and starts no renewer; a release deletes nothing and signals no renewer.
  diff_mode:
    support: full
    description: The Lease taken or released, whole; the gpushare stdout callback shows it in one line, with C(-v) whole.
"""

EXAMPLES = r"""
- name: Take the runbook lock
  gpushare.gpu_sharing.gpushare_lock:
    name: gpushare-runbook-lock
    namespace: gpushare-system
    holder: "{{ _timeslicing_lock.holder }}"
    take: "{{ _timeslicing_lock.take }}"
    state: held
  register: __gpu_operator_lock
"""

RETURN = r"""
outcomes:
  description: With V(held), one line per change of the take.
  returned: with held
  type: list
  elements: str
holder:
  description: The holder identity of the Lease taken, for the release.
  returned: when the lock was taken (not in check mode)
  type: str
renewer:
  description: The pid of the Lease's renewer on the controller, for O(renewer) of the release.
  returned: when the lock was taken (not in check mode)
  type: int
"""
