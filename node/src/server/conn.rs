//! A header-read timeout for every connection: a client that starts a request must finish its
//! header block (`\r\n\r\n`) within the timeout, or the connection is closed (slow-header
//! clients would otherwise hold a connection and its buffers forever). The clock starts at
//! accept for the first request and at the first byte of each later one, so an idle
//! keep-alive connection or a long response (an event stream) is never cut.
//!
//! This works on the bytes, below HTTP: [`HeaderDeadlineListener`] wraps the TCP listener and
//! hands out [`HeaderDeadline`] streams. HTTP/2 (prior knowledge) connections are left alone.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Sleep;

/// Default time a client has to send a request's headers.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);

const HEADER_END: &[u8; 4] = b"\r\n\r\n";
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0";

/// The TCP listener of the node, handing out [`HeaderDeadline`] streams.
#[derive(Debug)]
pub struct HeaderDeadlineListener {
    inner: TcpListener,
    timeout: Duration,
}

impl HeaderDeadlineListener {
    pub fn new(inner: TcpListener, timeout: Duration) -> Self {
        Self { inner, timeout }
    }
}

impl axum::serve::Listener for HeaderDeadlineListener {
    type Io = HeaderDeadline<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        let (stream, addr) = axum::serve::Listener::accept(&mut self.inner).await;
        (HeaderDeadline::new(stream, self.timeout), addr)
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.inner.local_addr()
    }
}

#[derive(Debug)]
enum Phase {
    /// Reading a header block: `matched` bytes of `\r\n\r\n` seen; the clock runs once set.
    Headers {
        deadline: Option<Pin<Box<Sleep>>>,
        matched: usize,
        first: bool,
    },
    /// The headers are in; the body and the response follow (no clock).
    Message,
    /// HTTP/2: not ours to time.
    Off,
}

/// A stream whose request headers must arrive within a timeout (see the module docs).
#[derive(Debug)]
pub struct HeaderDeadline<S> {
    inner: S,
    timeout: Duration,
    phase: Phase,
}

impl<S> HeaderDeadline<S> {
    pub fn new(inner: S, timeout: Duration) -> Self {
        Self {
            inner,
            timeout,
            phase: Phase::Headers {
                deadline: Some(Box::pin(tokio::time::sleep(timeout))),
                matched: 0,
                first: true,
            },
        }
    }

    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// After a write: once a response is going out, what the client sends next is a new
    /// request's headers (the clock starts at its first byte).
    fn wrote(&mut self, polled: &Poll<io::Result<usize>>) {
        if matches!(polled, Poll::Ready(Ok(n)) if *n > 0) && matches!(self.phase, Phase::Message) {
            self.phase = Phase::Headers {
                deadline: None,
                matched: 0,
                first: false,
            };
        }
    }

    /// Follows the bytes just read.
    fn saw(&mut self, bytes: &[u8]) {
        let Phase::Headers {
            deadline,
            matched,
            first,
        } = &mut self.phase
        else {
            return;
        };
        if bytes.is_empty() {
            return;
        }
        if *first && bytes.starts_with(H2_PREFACE) {
            self.phase = Phase::Off;
            return;
        }
        *first = false;
        if deadline.is_none() {
            *deadline = Some(Box::pin(tokio::time::sleep(self.timeout)));
        }
        for &b in bytes {
            *matched = if b == HEADER_END[*matched] {
                *matched + 1
            } else if b == HEADER_END[0] {
                1
            } else {
                0
            };
            if *matched == HEADER_END.len() {
                self.phase = Phase::Message;
                return;
            }
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for HeaderDeadline<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if let Phase::Headers {
            deadline: Some(deadline),
            ..
        } = &mut this.phase
            && deadline.as_mut().poll(cx).is_ready()
        {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "request headers not received in time",
            )));
        }
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = &polled {
            this.saw(&buf.filled()[before..]);
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for HeaderDeadline<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_write(cx, data);
        this.wrote(&polled);
        polled
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        this.wrote(&polled);
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_header_end_is_found_across_reads() {
        let mut s = HeaderDeadline::new(tokio::io::empty(), HEADER_READ_TIMEOUT);
        s.saw(b"GET / HTTP/1.1\r\nHost: x\r");
        assert!(matches!(s.phase, Phase::Headers { matched: 1, .. }));
        s.saw(b"\n\r");
        assert!(matches!(s.phase, Phase::Headers { matched: 3, .. }));
        s.saw(b"\nbody");
        assert!(matches!(s.phase, Phase::Message));
        let mut h2 = HeaderDeadline::new(tokio::io::empty(), HEADER_READ_TIMEOUT);
        h2.saw(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
        assert!(matches!(h2.phase, Phase::Off));
    }
}
