//! HTTP/1.1 on one connection, written and read by the calling task itself.
//!
//! A general client hands each request to a connection task and back (two task switches
//! per request); a load generator that must not be the bottleneck writes the request
//! in one `write` and parses the answer in place, as wrk does. Only what catalogs send
//! is understood: `Content-Length`, chunked bodies, `Connection: close`, and bodiless
//! answers to HEAD, 1xx, 204 and 304.

use std::io;

use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::client::Req;

const READ_CHUNK: usize = 16 * 1024;
/// Larger response heads are refused (a catalog's are a few hundred bytes).
const MAX_HEAD: usize = 64 * 1024;

#[derive(Debug)]
pub enum WireError {
    /// The peer closed the connection before any byte of the answer: on a reused
    /// connection, the request was not processed and may be sent again.
    ClosedBeforeAnswer,
    Io,
    Malformed,
}

/// An answer read in full.
pub struct Answer {
    pub status: u16,
    pub body: Bytes,
    /// Whether the connection may carry another request.
    pub reusable: bool,
}

pub struct Wire {
    stream: TcpStream,
    input: Vec<u8>,
    output: Vec<u8>,
}

impl Wire {
    pub fn new(stream: TcpStream) -> Wire {
        Wire {
            stream,
            input: Vec::with_capacity(READ_CHUNK),
            output: Vec::with_capacity(1024),
        }
    }

    /// Sends `req` with the given extra headers (`Name: value` lines) and reads the answer.
    pub async fn exchange(
        &mut self,
        req: &Req,
        headers: &[(&str, &[u8])],
    ) -> Result<Answer, WireError> {
        self.write_request(req, headers);
        self.stream
            .write_all(&self.output)
            .await
            .map_err(|e| closed_or_io(&e))?;
        self.input.clear();
        let head = self.read_head().await?;
        let bodiless = req.method == hyper::Method::HEAD
            || head.status < 200
            || head.status == 204
            || head.status == 304;
        let body = if bodiless {
            Bytes::new()
        } else if head.chunked {
            self.read_chunked(head.length).await?
        } else if let Some(length) = head.content_length {
            self.read_exactly(head.length, length).await?
        } else {
            self.read_to_end(head.length).await?
        };
        let reusable =
            head.keep_alive && (bodiless || head.chunked || head.content_length.is_some());
        Ok(Answer {
            status: head.status,
            body,
            reusable,
        })
    }

    fn write_request(&mut self, req: &Req, headers: &[(&str, &[u8])]) {
        let out = &mut self.output;
        out.clear();
        out.extend_from_slice(req.method.as_str().as_bytes());
        out.push(b' ');
        out.extend_from_slice(
            req.uri
                .path_and_query()
                .map_or("/", |p| p.as_str())
                .as_bytes(),
        );
        out.extend_from_slice(b" HTTP/1.1\r\n");
        for (name, value) in headers {
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(value);
            out.extend_from_slice(b"\r\n");
        }
        if let Some(body) = &req.body {
            out.extend_from_slice(b"Content-Type: ");
            out.extend_from_slice(req.content_type.as_bytes());
            out.extend_from_slice(format!("\r\nContent-Length: {}\r\n\r\n", body.len()).as_bytes());
            out.extend_from_slice(body);
        } else {
            out.extend_from_slice(b"\r\n");
        }
    }

    /// Reads more input; `Ok(false)` at end of stream.
    async fn fill(&mut self) -> Result<bool, WireError> {
        self.input.reserve(READ_CHUNK);
        match self.stream.read_buf(&mut self.input).await {
            Ok(0) => Ok(false),
            Ok(_) => Ok(true),
            Err(e) if self.input.is_empty() => Err(closed_or_io(&e)),
            Err(_) => Err(WireError::Io),
        }
    }

    async fn read_head(&mut self) -> Result<Head, WireError> {
        let mut scanned = 0;
        loop {
            if let Some(end) = find(&self.input[scanned..], b"\r\n\r\n").map(|i| i + scanned + 4) {
                return parse_head(&self.input[..end], end);
            }
            scanned = self.input.len().saturating_sub(3);
            if self.input.len() > MAX_HEAD {
                return Err(WireError::Malformed);
            }
            let was_empty = self.input.is_empty();
            if !self.fill().await? {
                return Err(if was_empty {
                    WireError::ClosedBeforeAnswer
                } else {
                    WireError::Io
                });
            }
        }
    }

    async fn read_exactly(&mut self, start: usize, length: usize) -> Result<Bytes, WireError> {
        while self.input.len() < start + length {
            if !self.fill().await? {
                return Err(WireError::Io);
            }
        }
        Ok(Bytes::copy_from_slice(&self.input[start..start + length]))
    }

    async fn read_to_end(&mut self, start: usize) -> Result<Bytes, WireError> {
        while self.fill().await? {}
        Ok(Bytes::copy_from_slice(&self.input[start..]))
    }

    async fn read_chunked(&mut self, mut at: usize) -> Result<Bytes, WireError> {
        let mut body = Vec::new();
        loop {
            let line_end = loop {
                if let Some(i) = find(&self.input[at..], b"\r\n") {
                    break at + i;
                }
                if !self.fill().await? {
                    return Err(WireError::Io);
                }
            };
            let line =
                std::str::from_utf8(&self.input[at..line_end]).map_err(|_| WireError::Malformed)?;
            let size_text = line.split(';').next().unwrap_or("").trim();
            let size = usize::from_str_radix(size_text, 16).map_err(|_| WireError::Malformed)?;
            at = line_end + 2;
            if size == 0 {
                // Trailers (rare) end with an empty line.
                loop {
                    if let Some(i) = find(&self.input[at..], b"\r\n") {
                        if i == 0 {
                            return Ok(Bytes::from(body));
                        }
                        at += i + 2;
                    } else if !self.fill().await? {
                        return Err(WireError::Io);
                    }
                }
            }
            while self.input.len() < at + size + 2 {
                if !self.fill().await? {
                    return Err(WireError::Io);
                }
            }
            body.extend_from_slice(&self.input[at..at + size]);
            at += size + 2;
        }
    }
}

struct Head {
    status: u16,
    /// Bytes of the head, where the body starts.
    length: usize,
    content_length: Option<usize>,
    chunked: bool,
    keep_alive: bool,
}

fn parse_head(head: &[u8], length: usize) -> Result<Head, WireError> {
    let text = std::str::from_utf8(head).map_err(|_| WireError::Malformed)?;
    let mut lines = text.split("\r\n");
    let status_line = lines.next().ok_or(WireError::Malformed)?;
    let mut parts = status_line.splitn(3, ' ');
    let version = parts.next().unwrap_or("");
    let status = parts
        .next()
        .and_then(|s| s.parse().ok())
        .ok_or(WireError::Malformed)?;
    let mut parsed = Head {
        status,
        length,
        content_length: None,
        chunked: false,
        keep_alive: version == "HTTP/1.1",
    };
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("content-length") {
            parsed.content_length = Some(value.parse().map_err(|_| WireError::Malformed)?);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            parsed.chunked = value.to_ascii_lowercase().contains("chunked");
        } else if name.eq_ignore_ascii_case("connection") {
            let value = value.to_ascii_lowercase();
            if value.contains("close") {
                parsed.keep_alive = false;
            } else if value.contains("keep-alive") {
                parsed.keep_alive = true;
            }
        }
    }
    Ok(parsed)
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn closed_or_io(e: &io::Error) -> WireError {
    match e.kind() {
        io::ErrorKind::BrokenPipe
        | io::ErrorKind::ConnectionReset
        | io::ErrorKind::ConnectionAborted => WireError::ClosedBeforeAnswer,
        _ => WireError::Io,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heads_are_parsed_case_insensitively() {
        let raw = b"HTTP/1.1 201 Created\r\ncontent-length: 12\r\nConnection: Close\r\n\r\n";
        let head = parse_head(raw, raw.len()).unwrap();
        assert_eq!(head.status, 201);
        assert_eq!(head.content_length, Some(12));
        assert!(!head.keep_alive && !head.chunked);
        let raw = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
        let head = parse_head(raw, raw.len()).unwrap();
        assert!(head.chunked && head.keep_alive);
        assert!(parse_head(b"garbage\r\n\r\n", 11).is_err());
    }

    /// A server that answers each request with the next canned response, byte for byte,
    /// in small pieces so that the reader must assemble them.
    async fn canned(responses: Vec<&'static [u8]>) -> Wire {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut request = [0u8; 4096];
            for response in responses {
                let _ = socket.read(&mut request).await.unwrap();
                for piece in response.chunks(5) {
                    socket.write_all(piece).await.unwrap();
                    socket.flush().await.unwrap();
                    tokio::task::yield_now().await;
                }
            }
        });
        Wire::new(TcpStream::connect(address).await.unwrap())
    }

    #[tokio::test]
    async fn bodies_by_length_chunks_and_close() {
        let mut wire = canned(vec![
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4;x=y\r\nWiki\r\n6\r\npedia \r\n0\r\n\r\n",
            b"HTTP/1.1 204 No Content\r\n\r\n",
            b"HTTP/1.0 200 OK\r\n\r\nuntil the end",
        ])
        .await;
        let get = Req::get(super::super::client::uri("/x").unwrap());
        let a = wire.exchange(&get, &[("Host", b"h")]).await.unwrap();
        assert_eq!(
            (a.status, &a.body[..], a.reusable),
            (200, &b"hello"[..], true)
        );
        let a = wire.exchange(&get, &[]).await.unwrap();
        assert_eq!((&a.body[..], a.reusable), (&b"Wikipedia "[..], true));
        let a = wire.exchange(&get, &[]).await.unwrap();
        assert_eq!((a.status, a.body.len()), (204, 0));
        let a = wire.exchange(&get, &[]).await.unwrap();
        assert_eq!((&a.body[..], a.reusable), (&b"until the end"[..], false));
        assert!(matches!(
            wire.exchange(&get, &[]).await,
            Err(WireError::ClosedBeforeAnswer | WireError::Io)
        ));
    }

    #[test]
    fn requests_are_written_in_one_buffer() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let stream = TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
            let mut wire = Wire::new(stream);
            let req = Req::with_body(
                hyper::Method::POST,
                super::super::client::uri("/v1/a%1Fb?x=1").unwrap(),
                Bytes::from_static(b"{}"),
            );
            wire.write_request(&req, &[("Host", b"h:1")]);
            assert_eq!(
                String::from_utf8(wire.output.clone()).unwrap(),
                "POST /v1/a%1Fb?x=1 HTTP/1.1\r\nHost: h:1\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
            );
        });
    }
}
