//! TLS between the coordinator and the agents, the agent's side: its listener served over TLS
//! 1.3 with a key and certificate given as files, or kept in a directory of rtemu's own where
//! `rtemu serve` makes a self-signed pair the first time. The coordinator pins the
//! certificate's fingerprint; the pin, the client and what both sides share are in
//! [`rtemu_api::tls`].

use std::net::SocketAddr;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{anyhow, bail, Context, Result};
use rtemu_api::tls::{provider, read_certificate, read_pem, Fingerprint, CERT_FILE, KEY_FILE};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// Where an agent's key and certificate come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// Given files (PEM): any certificate will do, since the coordinator pins it.
    Files {
        /// The certificate (the first in the file is the one presented and pinned).
        cert: PathBuf,
        /// Its private key, which only its owner, this user, may read.
        key: PathBuf,
    },
    /// A directory of rtemu's own: the key and the self-signed certificate in it, made there
    /// the first time (so a restarted agent keeps its fingerprint).
    Dir(PathBuf),
}

/// An agent's certificate and key, ready to serve.
#[derive(Debug)]
pub struct AgentCert {
    cert: CertificateDer<'static>,
    key: PrivateKeyDer<'static>,
    /// Whether it was made just now (in a [`Source::Dir`]).
    pub made: bool,
}

impl AgentCert {
    /// The key and certificate of `source`; in a directory, made when absent, for an agent
    /// listening on `addr` (its address is in the certificate, for tools that check names).
    pub fn load(source: &Source, addr: SocketAddr) -> Result<AgentCert> {
        match source {
            Source::Files { cert, key } => AgentCert::read(cert, key, false),
            Source::Dir(dir) => AgentCert::in_dir(dir, addr),
        }
    }

    /// Its SHA-256 fingerprint, which the coordinator's credentials pin.
    pub fn fingerprint(&self) -> Fingerprint {
        Fingerprint::of(&self.cert)
    }

    /// What accepts TLS connections with it.
    pub fn acceptor(&self) -> Result<tokio_rustls::TlsAcceptor> {
        Ok(tokio_rustls::TlsAcceptor::from(self.server_config()?))
    }

    /// The server's TLS setup with it (TLS 1.3 only: both ends are rtemu).
    pub fn server_config(&self) -> Result<Arc<rustls::ServerConfig>> {
        let config = rustls::ServerConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .context("setting up TLS")?
            .with_no_client_auth()
            .with_single_cert(vec![self.cert.clone()], self.key.clone_key())
            .context("the TLS key does not fit its certificate")?;
        Ok(Arc::new(config))
    }

    /// A new key and a self-signed certificate naming `names`, with their PEM texts (key,
    /// certificate).
    pub fn new_pair(names: Vec<String>) -> Result<(AgentCert, String, String)> {
        let made = rcgen::generate_simple_self_signed(names).context("making a TLS key")?;
        let key = made.signing_key.serialize_pem();
        let cert = made.cert.pem();
        let pair = AgentCert {
            cert: made.cert.der().clone(),
            key: PrivateKeyDer::try_from(made.signing_key.serialize_der())
                .map_err(|e| anyhow!("the key made: {e}"))?,
            made: true,
        };
        Ok((pair, key, cert))
    }

    fn read(cert: &Path, key: &Path, made: bool) -> Result<AgentCert> {
        let key_pem = read_pem(key, true)?;
        let key = PrivateKeyDer::from_pem_slice(&key_pem)
            .map_err(|e| anyhow!("{}: no private key in PEM ({e})", key.display()))?;
        let cert = read_certificate(cert)?;
        Ok(AgentCert { cert, key, made })
    }

    /// The pair in `dir`, made when neither file is there yet. `dir` is created (mode 0700)
    /// when missing and must be one only this user (root) can write.
    fn in_dir(dir: &Path, addr: SocketAddr) -> Result<AgentCert> {
        match std::fs::DirBuilder::new().mode(0o700).create(dir) {
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => {
                return Err(e).with_context(|| format!("creating {}", dir.display()))
            }
            _ => {}
        }
        if !rtemu_topo::state::trusted_dir(dir)? {
            bail!("{} does not exist", dir.display());
        }
        let (key, cert) = (dir.join(KEY_FILE), dir.join(CERT_FILE));
        let exists = |p: &Path| std::fs::symlink_metadata(p).is_ok();
        match (exists(&key), exists(&cert)) {
            (true, true) => return AgentCert::read(&cert, &key, false),
            (false, false) => {}
            _ => bail!(
                "{} holds only one of {KEY_FILE} and {CERT_FILE}: remove it, and a new key and \
                 certificate are made (with a new fingerprint to put in the credentials)",
                dir.display()
            ),
        }
        let mut names = vec!["rtemu-agent".to_owned()];
        if !addr.ip().is_unspecified() {
            names.push(addr.ip().to_string());
        }
        let (pair, key_pem, cert_pem) = AgentCert::new_pair(names)?;
        let write = |path: &Path, pem: String, mode| {
            rtemu_sys::output::write_new(path, pem.as_bytes(), mode)
                .with_context(|| format!("creating {}", path.display()))
        };
        write(&key, key_pem, 0o600)?;
        write(&cert, cert_pem, 0o644)?;
        Ok(pair)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_s_pair_is_made_private_once_and_kept() {
        let dir = std::env::temp_dir().join(format!("rtemu-tls-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let source = Source::Dir(dir.clone());
        let addr: SocketAddr = "192.0.2.7:7781".parse().unwrap();
        let made = AgentCert::load(&source, addr).unwrap();
        assert!(made.made);
        use std::os::unix::fs::MetadataExt;
        let mode = |p: &Path| std::fs::symlink_metadata(p).unwrap().mode() & 0o777;
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&dir.join(KEY_FILE)), 0o600);
        // A restarted agent keeps its certificate, so its pin stays good.
        let again = AgentCert::load(&source, addr).unwrap();
        assert!(!again.made);
        assert_eq!(again.fingerprint(), made.fingerprint());
        again.server_config().unwrap();
        // The files as given, the same.
        let files = Source::Files {
            cert: dir.join(CERT_FILE),
            key: dir.join(KEY_FILE),
        };
        assert_eq!(
            AgentCert::load(&files, addr).unwrap().fingerprint(),
            made.fingerprint()
        );
        // A key others may read is refused, as is one half of a pair.
        use std::os::unix::fs::PermissionsExt;
        let perm = std::fs::Permissions::from_mode(0o644);
        std::fs::set_permissions(dir.join(KEY_FILE), perm).unwrap();
        let e = format!("{:#}", AgentCert::load(&source, addr).unwrap_err());
        assert!(e.contains("open to group or others (mode 644)"), "{e}");
        std::fs::remove_file(dir.join(KEY_FILE)).unwrap();
        let e = format!("{:#}", AgentCert::load(&source, addr).unwrap_err());
        assert!(
            e.contains("holds only one of agent.key and agent.crt"),
            "{e}"
        );
        // A key file that is a link is not followed.
        std::os::unix::fs::symlink(dir.join(CERT_FILE), dir.join(KEY_FILE)).unwrap();
        let e = format!("{:#}", AgentCert::load(&files, addr).unwrap_err());
        assert!(e.contains("agent.key"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
