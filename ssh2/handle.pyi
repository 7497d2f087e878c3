from typing_extensions import disjoint_base  # an extension type: no class combines two

from ssh2.session import Session

@disjoint_base
class SessionChild:
    """Base of the objects that own a libssh2 handle of a session (not built directly)."""
    session: Session
