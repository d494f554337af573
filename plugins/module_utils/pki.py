# Copyright: kosmos.kubenest maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""X.509 building blocks for Kubernetes control planes: CAs, leaf certificates, service-account keys, PEM."""

from __future__ import annotations

import datetime
import hashlib
import ipaddress
import re
import traceback
from collections import namedtuple

try:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec, rsa
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
except ImportError:
    HAS_CRYPTOGRAPHY = False
    CRYPTOGRAPHY_IMPORT_ERROR = traceback.format_exc()
else:
    HAS_CRYPTOGRAPHY = True
    CRYPTOGRAPHY_IMPORT_ERROR = None

CA_VALIDITY_DAYS = 3650
LEAF_VALIDITY_DAYS = 365
RSA_KEY_SIZE = 2048
RENEW_BEFORE_DAYS = 30
# Certificates start slightly in the past so that peers with a lagging clock accept them right away.
CLOCK_SKEW = datetime.timedelta(minutes=5)

CertAndKey = namedtuple("CertAndKey", ["cert", "key"])
# PEM blocks of a bundle, found one by one (cryptography reads several at once only from release 39).
CERTIFICATE_PEM = re.compile(rb"-----BEGIN CERTIFICATE-----[^-]+-----END CERTIFICATE-----\n?")
PUBLIC_KEY_PEM = re.compile(rb"-----BEGIN PUBLIC KEY-----[^-]+-----END PUBLIC KEY-----\n?")
# X.509 (RFC 5280) caps a common name at 64 characters, and cryptography refuses longer ones.
COMMON_NAME_MAX = 64
CA_NAME_DIGEST = 16


def ca_common_name(common_name):
    """A CA's common name as issued: unchanged up to 64 characters, else its first 47 and a digest of all of it.

    A CA's name only labels it (nothing authenticates by it), and CA names carry the tenant's namespace and name,
    which together may pass 64 characters. Leaf names are identities (system:node:<name>) and are never
    shortened: a leaf name that is too long is an error.
    """
    if len(common_name) <= COMMON_NAME_MAX:
        return common_name
    digest = hashlib.sha256(common_name.encode("utf-8")).hexdigest()[:CA_NAME_DIGEST]
    return "%s-%s" % (common_name[:COMMON_NAME_MAX - CA_NAME_DIGEST - 1], digest)


def generate_private_key(key_type="rsa", rsa_key_size=RSA_KEY_SIZE):
    """Return a new private key: RSA of `rsa_key_size` bits, or EC on curve P-256 when `key_type` is "ec"."""
    if key_type == "rsa":
        return rsa.generate_private_key(public_exponent=65537, key_size=rsa_key_size)
    if key_type == "ec":
        return ec.generate_private_key(ec.SECP256R1())
    raise ValueError("unsupported key type %r (expected 'rsa' or 'ec')" % (key_type,))


def _name(common_name, organizations=()):
    if not 0 < len(common_name) <= COMMON_NAME_MAX:
        raise ValueError("common name %r must have 1 to %d characters, not %d"
                         % (common_name, COMMON_NAME_MAX, len(common_name)))
    attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org) for org in organizations]
    attributes.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    return x509.Name(attributes)


def _validity(days, now=None):
    now = now or datetime.datetime.now(datetime.timezone.utc)
    return now - CLOCK_SKEW, now + datetime.timedelta(days=days)


def _subject_alt_names(dns_names, ip_addresses):
    names = [x509.DNSName(name) for name in dns_names]
    names.extend(x509.IPAddress(ipaddress.ip_address(ip)) for ip in ip_addresses)
    return names


def _key_usage(digital_signature=False, key_encipherment=False, key_cert_sign=False):
    return x509.KeyUsage(
        digital_signature=digital_signature,
        content_commitment=False,
        key_encipherment=key_encipherment,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=key_cert_sign,
        crl_sign=key_cert_sign,
        encipher_only=False,
        decipher_only=False,
    )


def new_ca(common_name, validity_days=CA_VALIDITY_DAYS, key=None, key_type="rsa"):
    """Return a self-signed CA certificate and its key (a new one, or `key`)."""
    key = key or generate_private_key(key_type)
    not_before, not_after = _validity(validity_days)
    public_key = key.public_key()
    common_name = ca_common_name(common_name)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(_name(common_name))
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(_key_usage(digital_signature=True, key_cert_sign=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public_key), critical=False)
    )
    return CertAndKey(builder.sign(key, hashes.SHA256()), key)


def issue_certificate(ca, common_name, organizations=(), dns_names=(), ip_addresses=(), server=False,
                      client=False, validity_days=LEAF_VALIDITY_DAYS, key=None, key_type="rsa"):
    """Return a leaf certificate signed by `ca` (a CertAndKey) and its key.

    `organizations` become O= attributes, which Kubernetes reads as the client's groups. `server` and `client`
    select the extended key usages; at least one is required. The validity never outlasts the CA.
    """
    if not (server or client):
        raise ValueError("a leaf certificate needs server and/or client usage")
    key = key or generate_private_key(key_type)
    not_before, not_after = _validity(validity_days)
    not_after = min(not_after, certificate_not_after(ca.cert))
    usages = []
    if server:
        usages.append(ExtendedKeyUsageOID.SERVER_AUTH)
    if client:
        usages.append(ExtendedKeyUsageOID.CLIENT_AUTH)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name, organizations))
        .issuer_name(ca.cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(digital_signature=True, key_encipherment=isinstance(key, rsa.RSAPrivateKey)),
                       critical=True)
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key()), critical=False)
    )
    alt_names = _subject_alt_names(dns_names, ip_addresses)
    if alt_names:
        builder = builder.add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
    return CertAndKey(builder.sign(ca.key, hashes.SHA256()), key)


def certificate_not_after(cert):
    """End of validity as an aware UTC datetime, on old and new cryptography releases alike."""
    not_after = getattr(cert, "not_valid_after_utc", None)
    return not_after or cert.not_valid_after.replace(tzinfo=datetime.timezone.utc)


def certificate_not_before(cert):
    not_before = getattr(cert, "not_valid_before_utc", None)
    return not_before or cert.not_valid_before.replace(tzinfo=datetime.timezone.utc)


def renewal_window(cert, renew_before_days=RENEW_BEFORE_DAYS):
    """How long before its end a certificate is renewed: `renew_before_days`, but never more than a third of
    its lifetime, so that a short-lived certificate is not renewed again at once (and forever)."""
    lifetime = certificate_not_after(cert) - certificate_not_before(cert)
    return min(datetime.timedelta(days=renew_before_days), lifetime / 3)


def renewal_due(cert, renew_before_days=RENEW_BEFORE_DAYS, now=None):
    """The time left when the certificate is inside its renewal window, else None."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    remaining = certificate_not_after(cert) - now
    return remaining if remaining < renewal_window(cert, renew_before_days) else None


def certificate_sha256(cert):
    """SHA-256 of the DER encoding, as lowercase hex (what TLS pinning compares)."""
    return cert.fingerprint(hashes.SHA256()).hex()


def new_service_account_key(key_type="rsa"):
    """Return the private key the API server signs service-account tokens with."""
    return generate_private_key(key_type)


def certificate_pem(cert):
    return cert.public_bytes(serialization.Encoding.PEM)


def private_key_pem(key):
    """Unencrypted PKCS#8 PEM, which every Kubernetes component reads for both RSA and EC keys."""
    return key.private_bytes(
        encoding=serialization.Encoding.PEM,
        format=serialization.PrivateFormat.PKCS8,
        encryption_algorithm=serialization.NoEncryption(),
    )


def public_key_pem(key):
    """PEM of the public half of `key` (a private or public key)."""
    public_key = key.public_key() if hasattr(key, "public_key") else key
    return public_key.public_bytes(
        encoding=serialization.Encoding.PEM,
        format=serialization.PublicFormat.SubjectPublicKeyInfo,
    )


def load_certificate_pem(data):
    """The first certificate of PEM data (of a trust bundle, its first: the one that signs)."""
    return x509.load_pem_x509_certificate(data)


def load_certificates_pem(data):
    """Every certificate of PEM data, in order; an empty list when there is none or it does not parse."""
    try:
        return [x509.load_pem_x509_certificate(block) for block in CERTIFICATE_PEM.findall(data or b"")]
    except ValueError:
        return []


def load_public_keys_pem(data):
    """Every public key of PEM data (a service-account key bundle), in order; unreadable blocks are left out."""
    keys = []
    for block in PUBLIC_KEY_PEM.findall(data or b""):
        try:
            keys.append(serialization.load_pem_public_key(block))
        except ValueError:
            continue
    return keys


def load_private_key_pem(data):
    return serialization.load_pem_private_key(data, password=None)


def certificate_spec(cert):
    """What a certificate asserts, in the shape the certificate module compares against its arguments."""
    try:
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        dns_names = sorted(sans.get_values_for_type(x509.DNSName))
        ip_addresses = sorted(str(ip) for ip in sans.get_values_for_type(x509.IPAddress))
    except x509.ExtensionNotFound:
        dns_names, ip_addresses = [], []
    try:
        usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    except x509.ExtensionNotFound:
        usages = []
    is_ca = cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    return {
        "common_name": cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value,
        "organizations": sorted(a.value for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)),
        "dns_names": dns_names,
        "ip_addresses": ip_addresses,
        "server": ExtendedKeyUsageOID.SERVER_AUTH in usages,
        "client": ExtendedKeyUsageOID.CLIENT_AUTH in usages,
        "is_ca": is_ca,
    }


def signed_by(cert, ca_cert):
    """True when `ca_cert`'s key produced `cert`'s signature (subject/issuer names alone can collide)."""
    if cert.issuer != ca_cert.subject:
        return False
    try:
        cert.verify_directly_issued_by(ca_cert)
    except (ValueError, TypeError, Exception):  # InvalidSignature and friends
        return False
    return True


def key_matches(cert, key):
    return public_key_pem(cert.public_key()) == public_key_pem(key)


def wanted_spec(common_name, organizations=(), dns_names=(), ip_addresses=(), usages=("client",), is_ca=False):
    """The certificate_spec() a certificate issued with these arguments has, for comparison."""
    return {
        "common_name": ca_common_name(common_name) if is_ca else common_name,
        "organizations": sorted(organizations),
        "dns_names": sorted(dns_names),
        "ip_addresses": sorted(str(ipaddress.ip_address(ip)) for ip in ip_addresses),
        "server": not is_ca and "server" in usages,
        "client": not is_ca and "client" in usages,
        "is_ca": is_ca,
    }


SPEC_LABELS = (("common_name", "common name"), ("organizations", "organizations"), ("dns_names", "DNS names"),
               ("ip_addresses", "IP addresses"), ("server", "server usage"), ("client", "client usage"),
               ("is_ca", "CA flag"))


def reissue_reason(cert_pem, key_pem, ca, wanted, renew_before_days=RENEW_BEFORE_DAYS, now=None):
    """Why an existing pair (PEM bytes, None when absent) must be issued again, or None to keep it.

    `ca` is the signing CertAndKey (None for a CA), `wanted` a wanted_spec().
    """
    if cert_pem is None or key_pem is None:
        return "missing"
    try:
        cert = load_certificate_pem(cert_pem)
        key = load_private_key_pem(key_pem)
    except ValueError as exc:
        return "unreadable (%s)" % exc
    if not key_matches(cert, key):
        return "key does not match certificate"
    spec = certificate_spec(cert)
    for field, label in SPEC_LABELS:
        # A CA is kept whatever its name says: a new one would be trusted by nothing that trusts it (a backup
        # restored under another name keeps its CAs, whose names carry the old one).
        if field == "common_name" and spec["is_ca"] and wanted["is_ca"]:
            continue
        if spec[field] != wanted[field]:
            return "%s differ" % label
    if ca is not None and not signed_by(cert, ca.cert):
        return "not signed by the given CA"
    remaining = renewal_due(cert, renew_before_days, now=now)
    if remaining is not None:
        return "expires in %s" % describe_duration(remaining)
    return None


def describe_duration(delta):
    seconds = max(0, int(delta.total_seconds()))
    if seconds >= 86400:
        return "%d days" % (seconds // 86400)
    return "%d minutes" % (seconds // 60)
