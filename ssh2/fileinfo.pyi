from typing_extensions import disjoint_base  # an extension type: no class combines two

@disjoint_base
class FileInfo:
    st_size: int
    st_mode: int
    st_atime: int
    st_mtime: int
    st_uid: int
    st_gid: int
    st_nlink: int
    st_ino: int
    st_dev: int
    st_rdev: int
    st_blksize: int
    st_blocks: int
    st_ctime: int
