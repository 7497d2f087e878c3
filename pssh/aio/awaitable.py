"""Objects that can be awaited or used with ``async with`` (asyncssh's calling styles)."""
from typing import Any



class AwaitableContext:
    """``await it`` or ``async with it as x``: asyncssh's calling styles for ``connect``,
    ``start_sftp_client`` and ``SFTPClient.open``. ``async with`` enters and exits the
    object the coroutine returns."""

    def __init__(self, coro) -> None:
        self._coro = coro
        self._value: Any = None  # what the coroutine returned, once entered

    def __await__(self):
        return self._coro.__await__()

    async def __aenter__(self):
        self._value = await self._coro
        return await self._value.__aenter__()

    async def __aexit__(self, *exc_info):
        return await self._value.__aexit__(*exc_info)
