"""The models layer: every value that crosses a module boundary or is returned by the public API.

Values are frozen dataclasses with one ``to_dict`` each (JSON-ready). The submodules group
them by area; this package re-exports all of them, so ``from engramdb.models import X``
works for any public value.
"""

from engramdb.models.audit import *  # noqa: F403
from engramdb.models.audit import __all__ as _audit
from engramdb.models.auth import *  # noqa: F403
from engramdb.models.auth import __all__ as _auth
from engramdb.models.brain import *  # noqa: F403
from engramdb.models.brain import __all__ as _brain
from engramdb.models.code import *  # noqa: F403
from engramdb.models.code import __all__ as _code
from engramdb.models.conversation import *  # noqa: F403
from engramdb.models.conversation import __all__ as _conversation
from engramdb.models.episodes import *  # noqa: F403
from engramdb.models.episodes import __all__ as _episodes
from engramdb.models.failures import *  # noqa: F403
from engramdb.models.failures import __all__ as _failures
from engramdb.models.health import *  # noqa: F403
from engramdb.models.health import __all__ as _health
from engramdb.models.learning import *  # noqa: F403
from engramdb.models.learning import __all__ as _learning
from engramdb.models.memory import *  # noqa: F403
from engramdb.models.memory import __all__ as _memory
from engramdb.models.packs import *  # noqa: F403
from engramdb.models.packs import __all__ as _packs
from engramdb.models.privacy import *  # noqa: F403
from engramdb.models.privacy import __all__ as _privacy

__all__ = sorted(  # noqa: PLE0605
    [
        *_audit,
        *_auth,
        *_brain,
        *_code,
        *_conversation,
        *_episodes,
        *_failures,
        *_health,
        *_learning,
        *_memory,
        *_packs,
        *_privacy,
    ]
)
