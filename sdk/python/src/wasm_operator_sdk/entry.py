"""The component's entry, which componentize-py is given instead of the app
file (`componentize wasm_operator_sdk.entry`, world `logic-module-writes`):
the app file's `Reconciler` for the `reconciler` export, and for the
`writes` export the app file's `Writes` if it has one, else
`writes(Reconciler)`, the write model its module declares. So an app file
(`app.py` on the component's path) defines only `Reconciler`.
"""

import app  # type: ignore[import-not-found]

from .component import writes

Reconciler = app.Reconciler
Writes = getattr(app, "Writes", None) or writes(Reconciler)
