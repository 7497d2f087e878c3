from typing import Union
from typing_extensions import disjoint_base  # an extension type: no class combines two

from ssh2.channel import Channel
from ssh2.session import Session

@disjoint_base
class Listener:
    session: Session
    bound_port: int
    def forward_accept(self) -> Union[Channel, int]: ...
    def forward_cancel(self) -> int: ...
