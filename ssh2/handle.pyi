from ssh2.session import Session

class SessionChild:
    """Base of the objects that own a libssh2 handle of a session (not built directly)."""
    session: Session
