"""TEMPORARY: import ``ssh2.session`` before a program imports ``ssh2.channel`` or ``ssh2.sftp``.

In a fresh interpreter, importing ``ssh2.channel`` (or ``ssh2.sftp``, ``ssh2.sftp_handle``,
``ssh2.listener``, ``ssh2.publickey``) first fails with a circular-import AttributeError.
scrapli's ssh2 transport imports ``ssh2.channel`` first and broker's ssh2 binding
``ssh2.sftp``. The fix is being made in ``ssh2/`` on main; once it is merged, delete this
module, its two imports (scrapli_program.py, broker_program.py) and the ``xfail`` mark
of ``test_thirdparty.py::test_imports_first_in_a_fresh_interpreter``, which fails as soon
as the bug is gone.
"""
import ssh2.session  # noqa: F401
