class PublicKey:
    blob: bytes
    comment: bytes
    magic: int
