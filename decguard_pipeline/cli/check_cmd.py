"""Commands of this module are registered on ``cli`` at import (see app._register_commands)."""

from __future__ import annotations
