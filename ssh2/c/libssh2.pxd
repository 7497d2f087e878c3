# Extern declarations for libssh2.h (>= 1.11). Declarations only: wrappers live
# in the ssh2/*.pyx modules. Every function that may touch the network or do
# crypto is declared nogil so callers can release the GIL around it.
from libc.stdint cimport uint64_t, int64_t
from posix.types cimport time_t

cdef extern from "libssh2.h" nogil:
    ctypedef int libssh2_socket_t
    ctypedef uint64_t libssh2_uint64_t
    ctypedef int64_t libssh2_int64_t
    ctypedef struct LIBSSH2_SESSION:
        pass
    ctypedef struct LIBSSH2_CHANNEL:
        pass
    ctypedef struct LIBSSH2_LISTENER:
        pass
    ctypedef struct LIBSSH2_KNOWNHOSTS:
        pass
    ctypedef struct LIBSSH2_AGENT:
        pass
    ctypedef void libssh2_cb_generic()

    # struct stat on this platform (only the fields used are declared)
    ctypedef struct libssh2_struct_stat:
        int st_mode
        libssh2_int64_t st_size
        long st_atime
        long st_mtime
        long st_ctime
        unsigned int st_uid
        unsigned int st_gid
        unsigned int st_nlink
        unsigned long st_ino
        unsigned long st_dev
        unsigned long st_rdev
        long st_blksize
        long st_blocks

    ctypedef struct LIBSSH2_USERAUTH_KBDINT_PROMPT:
        unsigned char *text
        size_t length
        unsigned char echo
    ctypedef struct LIBSSH2_USERAUTH_KBDINT_RESPONSE:
        char *text
        unsigned int length

    ctypedef int (*publickey_sign_cb)(
        LIBSSH2_SESSION *session, unsigned char **sig, size_t *sig_len,
        const unsigned char *data, size_t data_len, void **abstract)
    int libssh2_userauth_publickey(LIBSSH2_SESSION *session, const char *username,
                                   const unsigned char *pubkeydata, size_t pubkeydata_len,
                                   publickey_sign_cb sign_callback, void **abstract)

    ctypedef void (*kbdint_response_cb)(
        const char *name, int name_len, const char *instruction,
        int instruction_len, int num_prompts,
        const LIBSSH2_USERAUTH_KBDINT_PROMPT *prompts,
        LIBSSH2_USERAUTH_KBDINT_RESPONSE *responses, void **abstract)

    struct libssh2_knownhost:
        unsigned int magic
        void *node
        char *name
        char *key
        int typemask

    struct libssh2_agent_publickey:
        unsigned int magic
        void *node
        unsigned char *blob
        size_t blob_len
        char *comment

    const char *LIBSSH2_VERSION
    enum:
        LIBSSH2_VERSION_NUM
        LIBSSH2_CALLBACK_SEND
        LIBSSH2_CALLBACK_RECV
        LIBSSH2_CALLBACK_AUTHAGENT
        LIBSSH2_CHANNEL_WINDOW_DEFAULT
        LIBSSH2_CHANNEL_PACKET_DEFAULT
        # session
        LIBSSH2_METHOD_KEX
        LIBSSH2_METHOD_HOSTKEY
        LIBSSH2_METHOD_CRYPT_CS
        LIBSSH2_METHOD_CRYPT_SC
        LIBSSH2_METHOD_MAC_CS
        LIBSSH2_METHOD_MAC_SC
        LIBSSH2_METHOD_COMP_CS
        LIBSSH2_METHOD_COMP_SC
        LIBSSH2_METHOD_LANG_CS
        LIBSSH2_METHOD_LANG_SC
        LIBSSH2_METHOD_SIGN_ALGO
        LIBSSH2_FLAG_SIGPIPE
        LIBSSH2_FLAG_COMPRESS
        LIBSSH2_FLAG_QUOTE_PATHS
        LIBSSH2_SESSION_BLOCK_INBOUND
        LIBSSH2_SESSION_BLOCK_OUTBOUND
        LIBSSH2_HOSTKEY_HASH_MD5
        LIBSSH2_HOSTKEY_HASH_SHA1
        LIBSSH2_HOSTKEY_HASH_SHA256
        LIBSSH2_HOSTKEY_TYPE_UNKNOWN
        LIBSSH2_HOSTKEY_TYPE_RSA
        LIBSSH2_HOSTKEY_TYPE_DSS
        LIBSSH2_HOSTKEY_TYPE_ECDSA_256
        LIBSSH2_HOSTKEY_TYPE_ECDSA_384
        LIBSSH2_HOSTKEY_TYPE_ECDSA_521
        LIBSSH2_HOSTKEY_TYPE_ED25519
        # channel
        LIBSSH2_CHANNEL_EXTENDED_DATA_NORMAL
        LIBSSH2_CHANNEL_EXTENDED_DATA_IGNORE
        LIBSSH2_CHANNEL_EXTENDED_DATA_MERGE
        LIBSSH2_CHANNEL_FLUSH_EXTENDED_DATA
        LIBSSH2_CHANNEL_FLUSH_ALL
        SSH_EXTENDED_DATA_STDERR
        # known hosts
        LIBSSH2_KNOWNHOST_TYPE_MASK
        LIBSSH2_KNOWNHOST_TYPE_PLAIN
        LIBSSH2_KNOWNHOST_TYPE_SHA1
        LIBSSH2_KNOWNHOST_TYPE_CUSTOM
        LIBSSH2_KNOWNHOST_KEYENC_MASK
        LIBSSH2_KNOWNHOST_KEYENC_RAW
        LIBSSH2_KNOWNHOST_KEYENC_BASE64
        LIBSSH2_KNOWNHOST_KEY_MASK
        LIBSSH2_KNOWNHOST_KEY_SHIFT
        LIBSSH2_KNOWNHOST_KEY_RSA1
        LIBSSH2_KNOWNHOST_KEY_SSHRSA
        LIBSSH2_KNOWNHOST_KEY_SSHDSS
        LIBSSH2_KNOWNHOST_KEY_ECDSA_256
        LIBSSH2_KNOWNHOST_KEY_ECDSA_384
        LIBSSH2_KNOWNHOST_KEY_ECDSA_521
        LIBSSH2_KNOWNHOST_KEY_ED25519
        LIBSSH2_KNOWNHOST_KEY_UNKNOWN
        LIBSSH2_KNOWNHOST_CHECK_MATCH
        LIBSSH2_KNOWNHOST_CHECK_MISMATCH
        LIBSSH2_KNOWNHOST_CHECK_NOTFOUND
        LIBSSH2_KNOWNHOST_CHECK_FAILURE
        LIBSSH2_KNOWNHOST_FILE_OPENSSH
        # errors
        LIBSSH2_ERROR_NONE
        LIBSSH2_ERROR_SOCKET_NONE
        LIBSSH2_ERROR_BANNER_RECV
        LIBSSH2_ERROR_BANNER_SEND
        LIBSSH2_ERROR_INVALID_MAC
        LIBSSH2_ERROR_KEX_FAILURE
        LIBSSH2_ERROR_ALLOC
        LIBSSH2_ERROR_SOCKET_SEND
        LIBSSH2_ERROR_KEY_EXCHANGE_FAILURE
        LIBSSH2_ERROR_TIMEOUT
        LIBSSH2_ERROR_HOSTKEY_INIT
        LIBSSH2_ERROR_HOSTKEY_SIGN
        LIBSSH2_ERROR_DECRYPT
        LIBSSH2_ERROR_SOCKET_DISCONNECT
        LIBSSH2_ERROR_PROTO
        LIBSSH2_ERROR_PASSWORD_EXPIRED
        LIBSSH2_ERROR_FILE
        LIBSSH2_ERROR_METHOD_NONE
        LIBSSH2_ERROR_AUTHENTICATION_FAILED
        LIBSSH2_ERROR_PUBLICKEY_UNRECOGNIZED
        LIBSSH2_ERROR_PUBLICKEY_UNVERIFIED
        LIBSSH2_ERROR_CHANNEL_OUTOFORDER
        LIBSSH2_ERROR_CHANNEL_FAILURE
        LIBSSH2_ERROR_CHANNEL_REQUEST_DENIED
        LIBSSH2_ERROR_CHANNEL_UNKNOWN
        LIBSSH2_ERROR_CHANNEL_WINDOW_EXCEEDED
        LIBSSH2_ERROR_CHANNEL_PACKET_EXCEEDED
        LIBSSH2_ERROR_CHANNEL_CLOSED
        LIBSSH2_ERROR_CHANNEL_EOF_SENT
        LIBSSH2_ERROR_SCP_PROTOCOL
        LIBSSH2_ERROR_ZLIB
        LIBSSH2_ERROR_SOCKET_TIMEOUT
        LIBSSH2_ERROR_SFTP_PROTOCOL
        LIBSSH2_ERROR_REQUEST_DENIED
        LIBSSH2_ERROR_METHOD_NOT_SUPPORTED
        LIBSSH2_ERROR_INVAL
        LIBSSH2_ERROR_INVALID_POLL_TYPE
        LIBSSH2_ERROR_PUBLICKEY_PROTOCOL
        LIBSSH2_ERROR_EAGAIN
        LIBSSH2_ERROR_BUFFER_TOO_SMALL
        LIBSSH2_ERROR_BAD_USE
        LIBSSH2_ERROR_COMPRESS
        LIBSSH2_ERROR_OUT_OF_BOUNDARY
        LIBSSH2_ERROR_AGENT_PROTOCOL
        LIBSSH2_ERROR_SOCKET_RECV
        LIBSSH2_ERROR_ENCRYPT
        LIBSSH2_ERROR_BAD_SOCKET
        LIBSSH2_ERROR_KNOWN_HOSTS
        LIBSSH2_ERROR_CHANNEL_WINDOW_FULL
        LIBSSH2_ERROR_KEYFILE_AUTH_FAILED
        LIBSSH2_ERROR_RANDGEN
        LIBSSH2_ERROR_MISSING_USERAUTH_BANNER
        LIBSSH2_ERROR_ALGO_UNSUPPORTED
        LIBSSH2_ERROR_MAC_FAILURE
        LIBSSH2_ERROR_HASH_INIT
        LIBSSH2_ERROR_HASH_CALC

    # library
    int libssh2_init(int flags)
    void libssh2_exit()
    void libssh2_free(LIBSSH2_SESSION *session, void *ptr)
    const char *libssh2_version(int req_version_num)

    # session
    LIBSSH2_SESSION *libssh2_session_init_ex(void *my_alloc, void *my_free,
                                             void *my_realloc, void *abstract)
    void **libssh2_session_abstract(LIBSSH2_SESSION *session)
    libssh2_cb_generic *libssh2_session_callback_set2(
        LIBSSH2_SESSION *session, int cbtype, libssh2_cb_generic *callback)
    int libssh2_session_handshake(LIBSSH2_SESSION *session, libssh2_socket_t sock)
    int libssh2_session_disconnect_ex(LIBSSH2_SESSION *session, int reason,
                                      const char *description, const char *lang)
    int libssh2_session_free(LIBSSH2_SESSION *session)
    const char *libssh2_hostkey_hash(LIBSSH2_SESSION *session, int hash_type)
    const char *libssh2_session_hostkey(LIBSSH2_SESSION *session, size_t *len, int *type)
    int libssh2_session_method_pref(LIBSSH2_SESSION *session, int method_type, const char *prefs)
    const char *libssh2_session_methods(LIBSSH2_SESSION *session, int method_type)
    int libssh2_session_supported_algs(LIBSSH2_SESSION *session, int method_type,
                                       const char ***algs)
    int libssh2_session_last_error(LIBSSH2_SESSION *session, char **errmsg,
                                   int *errmsg_len, int want_buf)
    int libssh2_session_last_errno(LIBSSH2_SESSION *session)
    int libssh2_session_set_last_error(LIBSSH2_SESSION *session, int errcode, const char *errmsg)
    int libssh2_session_block_directions(LIBSSH2_SESSION *session)
    int libssh2_session_flag(LIBSSH2_SESSION *session, int flag, int value)
    const char *libssh2_session_banner_get(LIBSSH2_SESSION *session)
    int libssh2_session_banner_set(LIBSSH2_SESSION *session, const char *banner)
    void libssh2_session_set_blocking(LIBSSH2_SESSION *session, int blocking)
    int libssh2_session_get_blocking(LIBSSH2_SESSION *session)
    void libssh2_session_set_timeout(LIBSSH2_SESSION *session, long timeout)
    long libssh2_session_get_timeout(LIBSSH2_SESSION *session)
    void libssh2_keepalive_config(LIBSSH2_SESSION *session, int want_reply, unsigned int interval)
    int libssh2_keepalive_send(LIBSSH2_SESSION *session, int *seconds_to_next)

    # user authentication
    char *libssh2_userauth_list(LIBSSH2_SESSION *session, const char *username,
                                unsigned int username_len)
    int libssh2_userauth_authenticated(LIBSSH2_SESSION *session)
    int libssh2_userauth_banner(LIBSSH2_SESSION *session, char **banner)
    int libssh2_userauth_password_ex(LIBSSH2_SESSION *session, const char *username,
                                     unsigned int username_len, const char *password,
                                     unsigned int password_len, void *passwd_change_cb)
    int libssh2_userauth_publickey_fromfile_ex(LIBSSH2_SESSION *session, const char *username,
                                               unsigned int username_len, const char *publickey,
                                               const char *privatekey, const char *passphrase)
    int libssh2_userauth_publickey_frommemory(LIBSSH2_SESSION *session, const char *username,
                                              size_t username_len, const char *publickeyfiledata,
                                              size_t publickeyfiledata_len,
                                              const char *privatekeyfiledata,
                                              size_t privatekeyfiledata_len,
                                              const char *passphrase)
    int libssh2_userauth_hostbased_fromfile_ex(LIBSSH2_SESSION *session, const char *username,
                                               unsigned int username_len, const char *publickey,
                                               const char *privatekey, const char *passphrase,
                                               const char *hostname, unsigned int hostname_len,
                                               const char *local_username,
                                               unsigned int local_username_len)
    int libssh2_userauth_keyboard_interactive_ex(LIBSSH2_SESSION *session, const char *username,
                                                 unsigned int username_len,
                                                 kbdint_response_cb response_callback)

    # channels
    LIBSSH2_CHANNEL *libssh2_channel_open_ex(LIBSSH2_SESSION *session, const char *channel_type,
                                             unsigned int channel_type_len,
                                             unsigned int window_size, unsigned int packet_size,
                                             const char *message, unsigned int message_len)
    LIBSSH2_CHANNEL *libssh2_channel_direct_tcpip_ex(LIBSSH2_SESSION *session, const char *host,
                                                     int port, const char *shost, int sport)
    LIBSSH2_CHANNEL *libssh2_channel_direct_streamlocal_ex(LIBSSH2_SESSION *session,
                                                           const char *socket_path,
                                                           const char *shost, int sport)
    LIBSSH2_LISTENER *libssh2_channel_forward_listen_ex(LIBSSH2_SESSION *session, const char *host,
                                                        int port, int *bound_port,
                                                        int queue_maxsize)
    int libssh2_channel_forward_cancel(LIBSSH2_LISTENER *listener)
    LIBSSH2_CHANNEL *libssh2_channel_forward_accept(LIBSSH2_LISTENER *listener)
    int libssh2_channel_setenv_ex(LIBSSH2_CHANNEL *channel, const char *varname,
                                  unsigned int varname_len, const char *value,
                                  unsigned int value_len)
    int libssh2_channel_request_auth_agent(LIBSSH2_CHANNEL *channel)
    int libssh2_channel_request_pty_ex(LIBSSH2_CHANNEL *channel, const char *term,
                                       unsigned int term_len, const char *modes,
                                       unsigned int modes_len, int width, int height,
                                       int width_px, int height_px)
    int libssh2_channel_request_pty_size_ex(LIBSSH2_CHANNEL *channel, int width, int height,
                                            int width_px, int height_px)
    int libssh2_channel_x11_req_ex(LIBSSH2_CHANNEL *channel, int single_connection,
                                   const char *auth_proto, const char *auth_cookie,
                                   int screen_number)
    int libssh2_channel_signal_ex(LIBSSH2_CHANNEL *channel, const char *signame,
                                  size_t signame_len)
    int libssh2_channel_process_startup(LIBSSH2_CHANNEL *channel, const char *request,
                                        unsigned int request_len, const char *message,
                                        unsigned int message_len)
    ssize_t libssh2_channel_read_ex(LIBSSH2_CHANNEL *channel, int stream_id, char *buf,
                                    size_t buflen)
    int libssh2_poll_channel_read(LIBSSH2_CHANNEL *channel, int extended)
    unsigned long libssh2_channel_window_read_ex(LIBSSH2_CHANNEL *channel,
                                                 unsigned long *read_avail,
                                                 unsigned long *window_size_initial)
    int libssh2_channel_receive_window_adjust2(LIBSSH2_CHANNEL *channel,
                                               unsigned long adjustment,
                                               unsigned char force, unsigned int *storewindow)
    ssize_t libssh2_channel_write_ex(LIBSSH2_CHANNEL *channel, int stream_id, const char *buf,
                                     size_t buflen)
    unsigned long libssh2_channel_window_write_ex(LIBSSH2_CHANNEL *channel,
                                                  unsigned long *window_size_initial)
    int libssh2_channel_handle_extended_data2(LIBSSH2_CHANNEL *channel, int ignore_mode)
    int libssh2_channel_flush_ex(LIBSSH2_CHANNEL *channel, int streamid)
    int libssh2_channel_get_exit_status(LIBSSH2_CHANNEL *channel)
    int libssh2_channel_get_exit_signal(LIBSSH2_CHANNEL *channel, char **exitsignal,
                                        size_t *exitsignal_len, char **errmsg,
                                        size_t *errmsg_len, char **langtag, size_t *langtag_len)
    int libssh2_channel_send_eof(LIBSSH2_CHANNEL *channel)
    int libssh2_channel_eof(LIBSSH2_CHANNEL *channel)
    int libssh2_channel_wait_eof(LIBSSH2_CHANNEL *channel)
    int libssh2_channel_close(LIBSSH2_CHANNEL *channel)
    int libssh2_channel_wait_closed(LIBSSH2_CHANNEL *channel)
    int libssh2_channel_free(LIBSSH2_CHANNEL *channel)

    # scp
    LIBSSH2_CHANNEL *libssh2_scp_recv2(LIBSSH2_SESSION *session, const char *path,
                                       libssh2_struct_stat *sb)
    LIBSSH2_CHANNEL *libssh2_scp_send64(LIBSSH2_SESSION *session, const char *path, int mode,
                                        libssh2_int64_t size, time_t mtime, time_t atime)

    # known hosts
    LIBSSH2_KNOWNHOSTS *libssh2_knownhost_init(LIBSSH2_SESSION *session)
    int libssh2_knownhost_addc(LIBSSH2_KNOWNHOSTS *hosts, const char *host, const char *salt,
                               const char *key, size_t keylen, const char *comment,
                               size_t commentlen, int typemask, libssh2_knownhost **store)
    int libssh2_knownhost_check(LIBSSH2_KNOWNHOSTS *hosts, const char *host, const char *key,
                                size_t keylen, int typemask, libssh2_knownhost **knownhost)
    int libssh2_knownhost_checkp(LIBSSH2_KNOWNHOSTS *hosts, const char *host, int port,
                                 const char *key, size_t keylen, int typemask,
                                 libssh2_knownhost **knownhost)
    int libssh2_knownhost_del(LIBSSH2_KNOWNHOSTS *hosts, libssh2_knownhost *entry)
    void libssh2_knownhost_free(LIBSSH2_KNOWNHOSTS *hosts)
    int libssh2_knownhost_readline(LIBSSH2_KNOWNHOSTS *hosts, const char *line, size_t len,
                                   int type)
    int libssh2_knownhost_readfile(LIBSSH2_KNOWNHOSTS *hosts, const char *filename, int type)
    int libssh2_knownhost_writeline(LIBSSH2_KNOWNHOSTS *hosts, libssh2_knownhost *known,
                                    char *buffer, size_t buflen, size_t *outlen, int type)
    int libssh2_knownhost_writefile(LIBSSH2_KNOWNHOSTS *hosts, const char *filename, int type)
    int libssh2_knownhost_get(LIBSSH2_KNOWNHOSTS *hosts, libssh2_knownhost **store,
                              libssh2_knownhost *prev)

    # agent
    LIBSSH2_AGENT *libssh2_agent_init(LIBSSH2_SESSION *session)
    int libssh2_agent_connect(LIBSSH2_AGENT *agent)
    int libssh2_agent_list_identities(LIBSSH2_AGENT *agent)
    int libssh2_agent_get_identity(LIBSSH2_AGENT *agent, libssh2_agent_publickey **store,
                                   libssh2_agent_publickey *prev)
    int libssh2_agent_userauth(LIBSSH2_AGENT *agent, const char *username,
                               libssh2_agent_publickey *identity)
    int libssh2_agent_disconnect(LIBSSH2_AGENT *agent)
    void libssh2_agent_free(LIBSSH2_AGENT *agent)
    void libssh2_agent_set_identity_path(LIBSSH2_AGENT *agent, const char *path)
    const char *libssh2_agent_get_identity_path(LIBSSH2_AGENT *agent)
