# Extern declarations for libssh2_sftp.h. Declarations only.
from ssh2.c.libssh2 cimport LIBSSH2_SESSION, LIBSSH2_CHANNEL, libssh2_uint64_t

cdef extern from "libssh2_sftp.h" nogil:
    ctypedef struct LIBSSH2_SFTP:
        pass
    ctypedef struct LIBSSH2_SFTP_HANDLE:
        pass
    ctypedef struct LIBSSH2_SFTP_ATTRIBUTES:
        unsigned long flags
        libssh2_uint64_t filesize
        unsigned long uid
        unsigned long gid
        unsigned long permissions
        unsigned long atime
        unsigned long mtime
    ctypedef struct LIBSSH2_SFTP_STATVFS:
        libssh2_uint64_t f_bsize
        libssh2_uint64_t f_frsize
        libssh2_uint64_t f_blocks
        libssh2_uint64_t f_bfree
        libssh2_uint64_t f_bavail
        libssh2_uint64_t f_files
        libssh2_uint64_t f_ffree
        libssh2_uint64_t f_favail
        libssh2_uint64_t f_fsid
        libssh2_uint64_t f_flag
        libssh2_uint64_t f_namemax

    enum:
        LIBSSH2_SFTP_OPENFILE
        LIBSSH2_SFTP_OPENDIR
        LIBSSH2_SFTP_RENAME_OVERWRITE
        LIBSSH2_SFTP_RENAME_ATOMIC
        LIBSSH2_SFTP_RENAME_NATIVE
        LIBSSH2_SFTP_STAT
        LIBSSH2_SFTP_LSTAT
        LIBSSH2_SFTP_SETSTAT
        LIBSSH2_SFTP_SYMLINK
        LIBSSH2_SFTP_READLINK
        LIBSSH2_SFTP_REALPATH
        LIBSSH2_SFTP_ATTR_SIZE
        LIBSSH2_SFTP_ATTR_UIDGID
        LIBSSH2_SFTP_ATTR_PERMISSIONS
        LIBSSH2_SFTP_ATTR_ACMODTIME
        LIBSSH2_SFTP_ATTR_EXTENDED
        LIBSSH2_SFTP_ST_RDONLY
        LIBSSH2_SFTP_ST_NOSUID
        LIBSSH2_SFTP_S_IFMT
        LIBSSH2_SFTP_S_IFIFO
        LIBSSH2_SFTP_S_IFCHR
        LIBSSH2_SFTP_S_IFDIR
        LIBSSH2_SFTP_S_IFBLK
        LIBSSH2_SFTP_S_IFREG
        LIBSSH2_SFTP_S_IFLNK
        LIBSSH2_SFTP_S_IFSOCK
        LIBSSH2_SFTP_S_IRWXU
        LIBSSH2_SFTP_S_IRUSR
        LIBSSH2_SFTP_S_IWUSR
        LIBSSH2_SFTP_S_IXUSR
        LIBSSH2_SFTP_S_IRWXG
        LIBSSH2_SFTP_S_IRGRP
        LIBSSH2_SFTP_S_IWGRP
        LIBSSH2_SFTP_S_IXGRP
        LIBSSH2_SFTP_S_IRWXO
        LIBSSH2_SFTP_S_IROTH
        LIBSSH2_SFTP_S_IWOTH
        LIBSSH2_SFTP_S_IXOTH
        LIBSSH2_FXF_READ
        LIBSSH2_FXF_WRITE
        LIBSSH2_FXF_APPEND
        LIBSSH2_FXF_CREAT
        LIBSSH2_FXF_TRUNC
        LIBSSH2_FXF_EXCL
        LIBSSH2_FX_OK
        LIBSSH2_FX_EOF
        LIBSSH2_FX_NO_SUCH_FILE
        LIBSSH2_FX_PERMISSION_DENIED
        LIBSSH2_FX_FAILURE
        LIBSSH2_FX_BAD_MESSAGE
        LIBSSH2_FX_NO_CONNECTION
        LIBSSH2_FX_CONNECTION_LOST
        LIBSSH2_FX_OP_UNSUPPORTED
        LIBSSH2_FX_INVALID_HANDLE
        LIBSSH2_FX_NO_SUCH_PATH
        LIBSSH2_FX_FILE_ALREADY_EXISTS
        LIBSSH2_FX_WRITE_PROTECT
        LIBSSH2_FX_NO_MEDIA
        LIBSSH2_FX_NO_SPACE_ON_FILESYSTEM
        LIBSSH2_FX_QUOTA_EXCEEDED
        LIBSSH2_FX_UNKNOWN_PRINCIPAL
        LIBSSH2_FX_LOCK_CONFLICT
        LIBSSH2_FX_DIR_NOT_EMPTY
        LIBSSH2_FX_NOT_A_DIRECTORY
        LIBSSH2_FX_INVALID_FILENAME
        LIBSSH2_FX_LINK_LOOP

    LIBSSH2_SFTP *libssh2_sftp_init(LIBSSH2_SESSION *session)
    int libssh2_sftp_shutdown(LIBSSH2_SFTP *sftp)
    unsigned long libssh2_sftp_last_error(LIBSSH2_SFTP *sftp)
    LIBSSH2_CHANNEL *libssh2_sftp_get_channel(LIBSSH2_SFTP *sftp)
    LIBSSH2_SFTP_HANDLE *libssh2_sftp_open_ex(LIBSSH2_SFTP *sftp, const char *filename,
                                              unsigned int filename_len, unsigned long flags,
                                              long mode, int open_type)
    ssize_t libssh2_sftp_read(LIBSSH2_SFTP_HANDLE *handle, char *buffer, size_t buffer_maxlen)
    int libssh2_sftp_readdir_ex(LIBSSH2_SFTP_HANDLE *handle, char *buffer, size_t buffer_maxlen,
                                char *longentry, size_t longentry_maxlen,
                                LIBSSH2_SFTP_ATTRIBUTES *attrs)
    ssize_t libssh2_sftp_write(LIBSSH2_SFTP_HANDLE *handle, const char *buffer, size_t count)
    int libssh2_sftp_fsync(LIBSSH2_SFTP_HANDLE *handle)
    int libssh2_sftp_close_handle(LIBSSH2_SFTP_HANDLE *handle)
    void libssh2_sftp_seek64(LIBSSH2_SFTP_HANDLE *handle, libssh2_uint64_t offset)
    libssh2_uint64_t libssh2_sftp_tell64(LIBSSH2_SFTP_HANDLE *handle)
    int libssh2_sftp_fstat_ex(LIBSSH2_SFTP_HANDLE *handle, LIBSSH2_SFTP_ATTRIBUTES *attrs,
                              int setstat)
    int libssh2_sftp_rename_ex(LIBSSH2_SFTP *sftp, const char *source_filename,
                               unsigned int source_filename_len, const char *dest_filename,
                               unsigned int dest_filename_len, long flags)
    int libssh2_sftp_posix_rename_ex(LIBSSH2_SFTP *sftp, const char *source_filename,
                                     size_t source_filename_len, const char *dest_filename,
                                     size_t dest_filename_len)
    int libssh2_sftp_unlink_ex(LIBSSH2_SFTP *sftp, const char *filename,
                               unsigned int filename_len)
    int libssh2_sftp_fstatvfs(LIBSSH2_SFTP_HANDLE *handle, LIBSSH2_SFTP_STATVFS *st)
    int libssh2_sftp_statvfs(LIBSSH2_SFTP *sftp, const char *path, size_t path_len,
                             LIBSSH2_SFTP_STATVFS *st)
    int libssh2_sftp_mkdir_ex(LIBSSH2_SFTP *sftp, const char *path, unsigned int path_len,
                              long mode)
    int libssh2_sftp_rmdir_ex(LIBSSH2_SFTP *sftp, const char *path, unsigned int path_len)
    int libssh2_sftp_stat_ex(LIBSSH2_SFTP *sftp, const char *path, unsigned int path_len,
                             int stat_type, LIBSSH2_SFTP_ATTRIBUTES *attrs)
    int libssh2_sftp_symlink_ex(LIBSSH2_SFTP *sftp, const char *path, unsigned int path_len,
                                char *target, unsigned int target_len, int link_type)
