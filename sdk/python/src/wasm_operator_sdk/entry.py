"""The component's entry, which componentize-py is given instead of the app
file (`componentize wasm_operator_sdk.entry`, world `logic-module-reach`):
the app file's `Reconciler` for the `reconciler` export; for the `writes`
export the app file's `Writes` if it has one, else `writes(Reconciler)`, the
write model its module declares; for contract 1.3's `reach` and
`admission` the app file's `Reach` and `Admission` if it has them, else
`reach(Reconciler)` (its `desired` told the time, with the timer it asks
for) and the SDK's `Admission` (no part). So an app file (`app.py` on the
component's path) defines only `Reconciler`.
"""

import app  # type: ignore[import-not-found]

from . import component

Reconciler = app.Reconciler
Writes = getattr(app, "Writes", None) or component.writes(Reconciler)
Reach = getattr(app, "Reach", None) or component.reach(Reconciler)
Admission = getattr(app, "Admission", None) or component.Admission
