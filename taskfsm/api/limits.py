"""Bounds on the size of what tenants write, enforced at admission (the CRDs' ``maxItems`` and
``maxProperties``) and again by the models (objects written before the CRDs had them).

Each bound is far above what a real object holds and keeps the controller's work per object
small: every MediaLocation of a Workflow costs a Secret read for each of its Tasks, and maps and
lists are copied into every Task's helper data (docs/security.md, "No object stops the
controller").
"""

from __future__ import annotations

from typing import Final

MAX_MEDIA_LOCATIONS: Final = 64
"""MediaLocations one Workflow may name."""
MAX_MEDIA: Final = 256
"""Inputs, and outputs, one Task or Workflow may list."""
MAX_MAP_ENTRIES: Final = 512
"""Entries of a ``config`` or ``defaultConfig`` map."""
