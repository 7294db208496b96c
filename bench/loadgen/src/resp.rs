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
