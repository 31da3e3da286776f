//! TLS between the coordinator and the agents, the client's side and what both sides share:
//! an agent (`rtemu serve --listen` with `--tls-dir` or `--tls-cert`/`--tls-key`) serves its
//! TCP listener over TLS 1.3, and the coordinator trusts exactly the certificate whose SHA-256
//! fingerprint the credentials file pins for that host. No certificate authority and no names
//! are involved: the pin is the trust, so a self-signed certificate that `rtemu serve` makes
//! for itself is enough, and a certificate from anywhere else (another agent's included) is
//! refused before any token is sent. The handshake's signatures are still verified, so only
//! the holder of the pinned certificate's key can complete it. The agent's side (its key and
//! certificate, made or read, and the acceptor) is `rtemu-serve`'s.

use std::fmt;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;

use anyhow::{anyhow, bail, Context, Result};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, SignatureScheme};

/// A certificate's SHA-256 fingerprint: the hash of its DER encoding, written as
/// `openssl x509 -fingerprint -sha256` writes it (upper-case hex pairs joined by colons).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fingerprint([u8; 32]);

impl Fingerprint {
    /// The fingerprint of the certificate `der`.
    pub fn of(der: &[u8]) -> Fingerprint {
        let digest = ring::digest::digest(&ring::digest::SHA256, der);
        let mut bytes = [0u8; 32];
        bytes.copy_from_slice(digest.as_ref());
        Fingerprint(bytes)
    }
}

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, b) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(":")?;
            }
            write!(f, "{b:02X}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Fingerprint({self})")
    }
}

impl FromStr for Fingerprint {
    type Err = anyhow::Error;

    /// 64 hex digits, of either case, colons between pairs allowed (as `rtemu serve` and
    /// `openssl` print it, or without the colons).
    fn from_str(s: &str) -> Result<Fingerprint> {
        let digits: Vec<u8> = s.bytes().filter(|&b| b != b':').collect();
        let hex = |b: u8| (b as char).to_digit(16);
        if digits.len() != 64 || !digits.iter().all(|&b| hex(b).is_some()) {
            bail!(
                "a certificate fingerprint is its SHA-256 in hex: 64 digits, colons between \
                 pairs allowed, as `rtemu serve` prints it"
            );
        }
        let mut bytes = [0u8; 32];
        for (i, pair) in digits.chunks(2).enumerate() {
            bytes[i] = (hex(pair[0]).unwrap_or(0) * 16 + hex(pair[1]).unwrap_or(0)) as u8;
        }
        Ok(Fingerprint(bytes))
    }
}

/// The key file's name in an agent's TLS directory (`rtemu serve --tls-dir`).
pub const KEY_FILE: &str = "agent.key";

/// The certificate file's name in an agent's TLS directory (`rtemu serve --tls-dir`).
pub const CERT_FILE: &str = "agent.crt";

/// The most bytes of a key or certificate file read.
const MAX_PEM: u64 = 64 * 1024;

/// The first certificate of the PEM file `path` (read as [`read_pem`] reads), the one an agent
/// presents and a coordinator pins.
pub fn read_certificate(path: &Path) -> Result<CertificateDer<'static>> {
    let pem = read_pem(path, false)?;
    CertificateDer::from_pem_slice(&pem)
        .map_err(|e| anyhow!("{}: no certificate in PEM ({e})", path.display()))
}

/// The PEM text of `path`, opened once without following a link in its last name and checked
/// on that descriptor: a regular file, and for a `secret` one that only its owner, this user,
/// may read. Errors never show the content.
pub fn read_pem(path: &Path, secret: bool) -> Result<Vec<u8>> {
    let flags = nix::fcntl::OFlag::O_NOFOLLOW | nix::fcntl::OFlag::O_NONBLOCK;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags.bits())
        .open(path)
        .with_context(|| format!("reading {}", path.display()))?;
    let meta = file
        .metadata()
        .with_context(|| format!("reading {}", path.display()))?;
    if !meta.is_file() {
        bail!("{} is not a regular file", path.display());
    }
    if secret {
        crate::secret::owner_only(path, &meta, "a private key")?;
    }
    let mut text = Vec::new();
    file.take(MAX_PEM + 1)
        .read_to_end(&mut text)
        .with_context(|| format!("reading {}", path.display()))?;
    if text.len() as u64 > MAX_PEM {
        bail!("{} is over {MAX_PEM} bytes: not a PEM file", path.display());
    }
    Ok(text)
}

/// The cryptography both ends use: *ring*'s.
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The client's TLS setup for an agent whose certificate must have fingerprint `pin`.
pub(crate) fn pinned(pin: Fingerprint) -> std::io::Result<Arc<rustls::ClientConfig>> {
    let provider = provider();
    let config = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(std::io::Error::other)?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(Pinned { pin, provider }))
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// `e`, a failed handshake's error, said plainly when the certificate was not the pinned one
/// (rustls shows its verifier's reasons only as debug output).
pub(crate) fn explain(e: std::io::Error) -> std::io::Error {
    let not_pinned = e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        .and_then(|r| match r {
            rustls::Error::InvalidCertificate(CertificateError::Other(o)) => {
                o.0.downcast_ref::<NotPinned>().map(ToString::to_string)
            }
            _ => None,
        });
    match not_pinned {
        Some(text) => std::io::Error::new(std::io::ErrorKind::PermissionDenied, text),
        None => e,
    }
}

/// Accepts exactly the certificate of fingerprint `pin`, whatever its names, issuer or
/// dates; the handshake's signatures are checked with the provider's algorithms.
#[derive(Debug)]
struct Pinned {
    pin: Fingerprint,
    provider: Arc<CryptoProvider>,
}

/// A certificate that is not the pinned one.
#[derive(Debug)]
struct NotPinned {
    presented: Fingerprint,
    pinned: Fingerprint,
}

impl fmt::Display for NotPinned {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "its certificate's SHA-256 fingerprint is {}, but the credentials pin {}: not the \
             agent they name (a new key? then pin the fingerprint its `rtemu serve` printed)",
            self.presented, self.pinned
        )
    }
}

impl std::error::Error for NotPinned {}

impl ServerCertVerifier for Pinned {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let presented = Fingerprint::of(end_entity);
        if presented == self.pin {
            return Ok(ServerCertVerified::assertion());
        }
        Err(rustls::Error::InvalidCertificate(CertificateError::Other(
            rustls::OtherError(Arc::new(NotPinned {
                presented,
                pinned: self.pin,
            })),
        )))
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprints_read_as_openssl_and_rtemu_write_them() {
        let f = Fingerprint::of(b"certificate");
        let shown = f.to_string();
        assert_eq!(shown.len(), 32 * 3 - 1);
        assert_eq!(shown.parse::<Fingerprint>().unwrap(), f);
        assert_eq!(shown.to_lowercase().parse::<Fingerprint>().unwrap(), f);
        assert_eq!(shown.replace(':', "").parse::<Fingerprint>().unwrap(), f);
        // SHA-256 of the empty string, a known answer.
        assert_eq!(
            Fingerprint::of(b"").to_string().replace(':', ""),
            "E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855"
        );
        for bad in [
            "",
            "AB:CD",
            &shown[1..],
            &format!("{shown}:00"),
            &format!("G{}", &shown[1..]),
        ] {
            assert!(bad.parse::<Fingerprint>().is_err(), "{bad:?}");
        }
    }
}
