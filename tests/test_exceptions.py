"""Exception classes: numbers, names, messages and the code-to-class map."""
import pytest

from ssh2 import error_codes
from ssh2 import exceptions as exc


def test_every_libssh2_error_code_maps_to_a_named_class():
    codes = {name: getattr(error_codes, name) for name in dir(error_codes)
             if name.startswith("LIBSSH2_ERROR_") and name not in
             ("LIBSSH2_ERROR_NONE", "LIBSSH2_ERROR_EAGAIN", "LIBSSH2_ERROR_PUBLICKEY_UNRECOGNIZED")}
    assert len(codes) > 50
    for name, code in codes.items():
        err = exc.error_for(code, "libssh2 says so", context="doing a thing")
        assert isinstance(err, exc.SSH2Error)
        assert type(err) is not exc.UnknownError, name
        assert err.errno == code
        assert err.errname == name
        text = str(err)
        assert text.startswith("doing a thing: libssh2 says so")
        assert f"libssh2 error {code} {name}" in text


def test_sftp_status_subclasses():
    assert isinstance(exc.error_for(-31, sftp_status=2), exc.SFTPNoSuchFileError)
    assert isinstance(exc.error_for(-31, sftp_status=3), exc.SFTPPermissionDeniedError)
    assert isinstance(exc.error_for(-31, sftp_status=11), exc.SFTPFileAlreadyExistsError)
    generic = exc.error_for(-31, sftp_status=13)
    assert type(generic) is exc.SFTPProtocolError and generic.status_name == "FX_NO_MEDIA"
    assert issubclass(exc.SFTPNoSuchFileError, exc.SFTPError)
    assert "SFTP status 3 FX_PERMISSION_DENIED" in str(exc.error_for(-31, sftp_status=3))


def test_message_defaults_and_host():
    err = exc.AuthenticationError()
    assert str(err).startswith("Authentication failed")
    err = exc.Timeout("no answer", -9, host="web1")
    assert str(err) == "web1: no answer (libssh2 error -9 LIBSSH2_ERROR_TIMEOUT)"
    assert exc.error_name(-37) == "LIBSSH2_ERROR_EAGAIN"
    with pytest.raises(exc.SSH2Error):
        raise exc.error_for(-999)
    assert isinstance(exc.error_for(-999), exc.UnknownError)


def test_handle_error_codes():
    from ssh2.utils import handle_error_codes
    assert handle_error_codes(0) == 0
    assert handle_error_codes(-37) == -37
    with pytest.raises(exc.AuthenticationError):
        handle_error_codes(-18)
