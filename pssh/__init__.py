"""Parallel SSH client on gevent and the ssh2 bindings (see pssh.sshd for test servers)."""
