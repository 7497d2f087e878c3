class PublicKey:
    blob: bytes
    comment: bytes
    magic: int
    @property
    def blob_len(self) -> int: ...
