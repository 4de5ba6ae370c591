//! Talking to an operator process on loopback: a free port for its
//! endpoints, and a plain HTTP/1.0 GET of /metrics or /readyz.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

pub fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// The status code and body of `GET path` on `address`.
pub async fn http_get(address: &str, path: &str) -> Result<(u16, String), std::io::Error> {
    let address = address.to_owned();
    let path = path.to_owned();
    let answer = tokio::task::spawn_blocking(move || -> Result<(u16, String), std::io::Error> {
        let socket = address.parse().map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
        let mut stream = TcpStream::connect_timeout(&socket, Duration::from_secs(2))?;
        stream.set_read_timeout(Some(Duration::from_secs(10)))?;
        stream.write_all(format!("GET {path} HTTP/1.0\r\nHost: {address}\r\n\r\n").as_bytes())?;
        let mut text = String::new();
        stream.read_to_string(&mut text)?;
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((text.as_str(), ""));
        let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
        Ok((status, body.to_owned()))
    })
    .await;
    answer.map_err(std::io::Error::other)?
}
