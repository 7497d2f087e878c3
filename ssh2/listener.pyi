from typing import Union

from ssh2.channel import Channel
from ssh2.session import Session

class Listener:
    session: Session
    bound_port: int
    def forward_accept(self) -> Union[Channel, int]: ...
    def forward_cancel(self) -> int: ...
