//! A minimal Redis client: commands as RESP arrays, replies read back (no pipelining).

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

#[derive(Debug, PartialEq)]
pub enum Reply {
    Simple(String),
    Integer(i64),
    Bulk(Option<Vec<u8>>),
}

pub struct Connection {
    stream: BufReader<TcpStream>,
}

impl Connection {
    pub async fn open(url: &str) -> Result<Self, String> {
        let address = url
            .strip_prefix("redis://")
            .ok_or_else(|| format!("{url}: only redis:// URLs"))?
            .trim_end_matches('/');
        let stream = TcpStream::connect(address)
            .await
            .map_err(|e| format!("connect {address}: {e}"))?;
        stream.set_nodelay(true).map_err(|e| e.to_string())?;
        Ok(Self {
            stream: BufReader::new(stream),
        })
    }

    pub async fn command(&mut self, args: &[&[u8]]) -> Result<Reply, String> {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for arg in args {
            out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
            out.extend_from_slice(arg);
            out.extend_from_slice(b"\r\n");
        }
        let io = |e: std::io::Error| format!("redis: {e}");
        self.stream.get_mut().write_all(&out).await.map_err(io)?;
        let line = self.line().await?;
        let (kind, rest) = line.split_at(1);
        let number = |s: &str| s.parse::<i64>().map_err(|e| format!("redis: {s:?}: {e}"));
        match kind {
            "+" => Ok(Reply::Simple(rest.to_owned())),
            "-" => Err(format!("redis error: {rest}")),
            ":" => Ok(Reply::Integer(number(rest)?)),
            "$" => {
                let Ok(len) = usize::try_from(number(rest)?) else {
                    return Ok(Reply::Bulk(None));
                };
                let mut data = vec![0; len + 2];
                self.stream.read_exact(&mut data).await.map_err(io)?;
                data.truncate(len);
                Ok(Reply::Bulk(Some(data)))
            }
            _ => Err(format!("redis: unexpected reply {line:?}")),
        }
    }

    async fn line(&mut self) -> Result<String, String> {
        let mut line = String::new();
        self.stream
            .read_line(&mut line)
            .await
            .map_err(|e| format!("redis: {e}"))?;
        let line = line.trim_end_matches("\r\n");
        if line.is_empty() {
            return Err("redis: connection closed".into());
        }
        Ok(line.to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;
    use tokio::net::TcpListener;

    /// A stand-in server that checks the command it receives and sends `reply` back.
    async fn served(reply: &'static [u8]) -> Result<Reply, String> {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("redis://{}", listener.local_addr().unwrap());
        let server = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let expected = b"*2\r\n$3\r\nGET\r\n$8\r\nlock:a b\r\n";
            let mut request = vec![0; expected.len()];
            socket.read_exact(&mut request).await.unwrap();
            assert_eq!(request, expected);
            socket.write_all(reply).await.unwrap();
        });
        let mut conn = Connection::open(&url).await.unwrap();
        let reply = conn.command(&[b"GET", b"lock:a b"]).await;
        server.await.unwrap();
        reply
    }

    #[tokio::test]
    async fn replies_are_read_as_redis_sends_them() {
        assert_eq!(served(b":42\r\n").await, Ok(Reply::Integer(42)));
        assert_eq!(served(b"+OK\r\n").await, Ok(Reply::Simple("OK".into())));
        assert_eq!(
            served(b"$5\r\nab\r\nc\r\n").await,
            Ok(Reply::Bulk(Some(b"ab\r\nc".to_vec())))
        );
        assert_eq!(served(b"$-1\r\n").await, Ok(Reply::Bulk(None)));
        assert_eq!(
            served(b"-NOSCRIPT no such script\r\n").await,
            Err("redis error: NOSCRIPT no such script".into())
        );
    }
}
