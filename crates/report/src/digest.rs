//! sha256 of the files a report is made from (and of anything else infergate
//! records by content), as lowercase hex.

pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(bytes);
    digest.iter().map(|b| format!("{b:02x}")).collect()
}
