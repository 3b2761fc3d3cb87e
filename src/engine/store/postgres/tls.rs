//! TLS to the server, with rustls on the ring provider, as the URL's `sslmode` says (libpq's
//! meanings, [`TlsMode`]).
//!
//! Invariants:
//! - `disable` never starts TLS; `prefer` (the default, as libpq's) uses it when the server
//!   offers it; `require`, `verify-ca` and `verify-full` connect only over TLS;
//! - `prefer` and `require` without `sslrootcert` encrypt without checking the certificate,
//!   exactly as libpq does (this protects against eavesdropping, not against an impostor);
//!   `require` with `sslrootcert`, and `verify-ca`, check the chain; `verify-full` checks the
//!   chain and the host name. The authorities are `sslrootcert`'s certificates, else Mozilla's
//!   (`webpki-roots`).

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use tokio_postgres::config::SslMode;
use tokio_postgres_rustls::MakeRustlsConnect;

use super::config::{ConnectionTarget, TlsMode};
use crate::engine::error::{Result, SessionError};

/// The `tokio-postgres` configuration of `target` with its TLS mode, and the connector that
/// makes its TLS connections.
///
/// # Errors
/// [`SessionError::Input`] at `option` when `sslrootcert` cannot be read or holds no
/// certificate.
pub(crate) fn connector(
    target: &ConnectionTarget,
    option: &str,
) -> Result<(tokio_postgres::Config, MakeRustlsConnect)> {
    let mut config = target.config.clone();
    config.ssl_mode(match target.tls {
        TlsMode::Disable => SslMode::Disable,
        TlsMode::Prefer => SslMode::Prefer,
        TlsMode::Require | TlsMode::VerifyCa | TlsMode::VerifyFull => SslMode::Require,
    });
    // ring's provider is deprecated in rustls 0.23.48 for lacking post-quantum key exchange;
    // aws-lc-rs has it but needs cmake and a C toolchain for every target of the addon.
    #[allow(deprecated)]
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier: Arc<dyn ServerCertVerifier> = match (target.tls, &target.root_cert) {
        (TlsMode::Disable | TlsMode::Prefer, _) | (TlsMode::Require, None) => {
            Arc::new(Unchecked(provider.clone()))
        }
        (TlsMode::Require | TlsMode::VerifyCa, _) => {
            Arc::new(ChainOnly(webpki(target, option, provider.clone())?))
        }
        (TlsMode::VerifyFull, _) => webpki(target, option, provider.clone())?,
    };
    let tls = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|error| SessionError::internal(format!("rustls refused its versions: {error}")))?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    Ok((config, MakeRustlsConnect::new(tls)))
}

/// The standard verifier, trusting `sslrootcert`'s authorities or Mozilla's.
fn webpki(
    target: &ConnectionTarget,
    option: &str,
    provider: Arc<CryptoProvider>,
) -> Result<Arc<WebPkiServerVerifier>> {
    let mut roots = RootCertStore::empty();
    match &target.root_cert {
        Some(path) => {
            let unreadable = |why: String| {
                SessionError::input(
                    option,
                    format!("the sslrootcert of {option} ({}) {why}", path.display()),
                )
            };
            let certificates = CertificateDer::pem_file_iter(path)
                .map_err(|error| unreadable(format!("cannot be read: {error}")))?
                .collect::<std::result::Result<Vec<_>, _>>()
                .map_err(|error| unreadable(format!("cannot be read: {error}")))?;
            let (added, _) = roots.add_parsable_certificates(certificates);
            if added == 0 {
                return Err(unreadable("holds no usable certificate".to_owned()));
            }
        }
        None => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
    }
    WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
        .build()
        .map_err(|error| SessionError::input(option, format!("{option}'s TLS roots: {error}")))
}

/// libpq's `prefer`/`require` without a root certificate: any certificate, the handshake's
/// signatures still checked (so the channel binding of SCRAM holds).
#[derive(Debug)]
struct Unchecked(Arc<CryptoProvider>);

impl ServerCertVerifier for Unchecked {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// libpq's `verify-ca`: the chain checked, the name not.
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}
