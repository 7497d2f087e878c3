# Extern declarations for libssh2_publickey.h: the publickey subsystem (RFC 4819).
from ssh2.c.libssh2 cimport LIBSSH2_SESSION

cdef extern from "libssh2_publickey.h" nogil:
    ctypedef struct LIBSSH2_PUBLICKEY:
        pass
    ctypedef struct libssh2_publickey_attribute:
        const char *name
        unsigned long name_len
        const char *value
        unsigned long value_len
        char mandatory
    ctypedef struct libssh2_publickey_list:
        unsigned char *packet
        const unsigned char *name
        unsigned long name_len
        const unsigned char *blob
        unsigned long blob_len
        unsigned long num_attrs
        libssh2_publickey_attribute *attrs
    LIBSSH2_PUBLICKEY *libssh2_publickey_init(LIBSSH2_SESSION *session)
    int libssh2_publickey_add_ex(LIBSSH2_PUBLICKEY *pkey, const unsigned char *name,
                                 unsigned long name_len, const unsigned char *blob,
                                 unsigned long blob_len, char overwrite,
                                 unsigned long num_attrs,
                                 const libssh2_publickey_attribute *attrs)
    int libssh2_publickey_remove_ex(LIBSSH2_PUBLICKEY *pkey, const unsigned char *name,
                                    unsigned long name_len, const unsigned char *blob,
                                    unsigned long blob_len)
    int libssh2_publickey_list_fetch(LIBSSH2_PUBLICKEY *pkey, unsigned long *num_keys,
                                     libssh2_publickey_list **pkey_list)
    void libssh2_publickey_list_free(LIBSSH2_PUBLICKEY *pkey, libssh2_publickey_list *pkey_list)
    int libssh2_publickey_shutdown(LIBSSH2_PUBLICKEY *pkey)
