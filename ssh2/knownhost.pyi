from typing import List, Optional, Union
from typing_extensions import disjoint_base  # an extension type: no class combines two

from ssh2.session import Session

_Str = Union[str, bytes]

LIBSSH2_KNOWNHOST_TYPE_MASK: int
LIBSSH2_KNOWNHOST_TYPE_PLAIN: int
LIBSSH2_KNOWNHOST_TYPE_SHA1: int
LIBSSH2_KNOWNHOST_TYPE_CUSTOM: int
LIBSSH2_KNOWNHOST_KEYENC_MASK: int
LIBSSH2_KNOWNHOST_KEYENC_RAW: int
LIBSSH2_KNOWNHOST_KEYENC_BASE64: int
LIBSSH2_KNOWNHOST_KEY_MASK: int
LIBSSH2_KNOWNHOST_KEY_SHIFT: int
LIBSSH2_KNOWNHOST_KEY_RSA1: int
LIBSSH2_KNOWNHOST_KEY_SSHRSA: int
LIBSSH2_KNOWNHOST_KEY_SSHDSS: int
LIBSSH2_KNOWNHOST_KEY_ECDSA_256: int
LIBSSH2_KNOWNHOST_KEY_ECDSA_384: int
LIBSSH2_KNOWNHOST_KEY_ECDSA_521: int
LIBSSH2_KNOWNHOST_KEY_ED25519: int
LIBSSH2_KNOWNHOST_KEY_UNKNOWN: int
LIBSSH2_KNOWNHOST_CHECK_MATCH: int
LIBSSH2_KNOWNHOST_CHECK_MISMATCH: int
LIBSSH2_KNOWNHOST_CHECK_NOTFOUND: int
LIBSSH2_KNOWNHOST_CHECK_FAILURE: int
LIBSSH2_KNOWNHOST_FILE_OPENSSH: int

def hostkey_typemask(hostkey_type: int) -> int: ...

@disjoint_base
class KnownHostEntry:
    magic: int
    name: Optional[bytes]
    key: Optional[bytes]
    typemask: int

@disjoint_base
class KnownHost:
    session: Session
    def readfile(self, filename: _Str, f_type: int = ...) -> int: ...
    def readline(self, line: _Str, f_type: int = ...) -> int: ...
    def writefile(self, filename: _Str, f_type: int = ...) -> int: ...
    def writeline(self, entry: KnownHostEntry, f_type: int = ..., buf_len: int = ...) -> bytes: ...
    def checkp(self, host: _Str, port: int, key: bytes, typemask: int) -> KnownHostEntry: ...
    def check(self, host: _Str, key: bytes, typemask: int) -> KnownHostEntry: ...
    def addc(self, host: _Str, key: bytes, typemask: int, salt: Optional[_Str] = ...,
             comment: Optional[_Str] = ...) -> KnownHostEntry: ...
    def add(self, host: _Str, key: bytes, typemask: int,
            salt: Optional[_Str] = ...) -> KnownHostEntry: ...
    def delete(self, entry: KnownHostEntry) -> int: ...
    def get(self, prev: Optional[KnownHostEntry] = ...) -> List[KnownHostEntry]: ...
