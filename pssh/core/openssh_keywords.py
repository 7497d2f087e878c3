"""The keywords OpenSSH's client knows (ssh_config(5), OpenSSH 9), in lower case.

Used to tell apart, in a ``pssh -O`` option, a keyword that is misspelt or does not
exist (an error, as ``ssh -o`` makes it) from one that OpenSSH has and pssh does not
interpret (:data:`pssh.core.ssh_config.SUPPORTED_KEYWORDS` are those it does).
"""
from __future__ import annotations

#: Every client keyword of ssh_config(5), plus the deprecated ones ssh still accepts
#: (and ignores) so that old config lines keep working.
OPENSSH_KEYWORDS = frozenset("""
    host match include
    addkeystoagent addressfamily batchmode bindaddress bindinterface canonicaldomains
    canonicalizefallbacklocal canonicalizehostname canonicalizemaxdots
    canonicalizepermittedcnames casignaturealgorithms certificatefile channeltimeout
    checkhostip ciphers clearallforwardings compression connectionattempts connecttimeout
    controlmaster controlpath controlpersist dynamicforward enableescapecommandline
    enablesshkeysign escapechar exitonforwardfailure fingerprinthash
    forkafterauthentication forwardagent forwardx11 forwardx11timeout forwardx11trusted
    gatewayports globalknownhostsfile gssapiauthentication gssapidelegatecredentials
    gssapikexalgorithms gssapikeyexchange gssapirenewalforcesrekey gssapitrustdns
    hashknownhosts hostbasedacceptedalgorithms hostbasedauthentication
    hostkeyalgorithms hostkeyalias hostname identitiesonly identityagent identityfile
    ignoreunknown ipqos kbdinteractiveauthentication kbdinteractivedevices kexalgorithms
    knownhostscommand localcommand localforward loglevel logverbose macs
    nohostauthenticationforlocalhost numberofpasswordprompts obscurekeystroketiming
    passwordauthentication permitlocalcommand permitremoteopen pkcs11provider port
    preferredauthentications proxycommand proxyjump proxyusefdpass
    pubkeyacceptedalgorithms pubkeyacceptedkeytypes pubkeyauthentication rekeylimit
    remotecommand remoteforward requesttty requiredrsasize revokedhostkeys
    securitykeyprovider sendenv serveralivecountmax serveraliveinterval sessiontype
    setenv smartcarddevice stdinnull streamlocalbindmask streamlocalbindunlink
    stricthostkeychecking syslogfacility tag tcpkeepalive tunnel tunneldevice
    updatehostkeys user userknownhostsfile verifyhostkeydns visualhostkey xauthlocation
    challengeresponseauthentication hostbasedkeytypes
    cipher compressionlevel dsaauthentication fallbacktorsh gssapiclientidentity
    gssapiserveridentity protocol rhostsauthentication rhostsrsaauthentication
    rsaauthentication skeyauthentication tisauthentication useprivilegedport
    useroaming usersh
    """.split())

__all__ = ["OPENSSH_KEYWORDS"]
