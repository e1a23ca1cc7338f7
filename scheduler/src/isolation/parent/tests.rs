use super::*;

async fn lines_of(input: &[u8], max: usize) -> Vec<(String, bool)> {
    let mut lines = Vec::new();
    read_lines(input, max, |line, cut| {
        lines.push((String::from_utf8_lossy(line).into_owned(), cut))
    })
    .await;
    lines
}

#[tokio::test]
async fn lines_are_split_and_bounded() {
    assert_eq!(
        lines_of(b"a\r\nbb\n\nlast", 8).await,
        [("a", false), ("bb", false), ("", false), ("last", false)].map(|(l, c)| (l.to_owned(), c))
    );
    assert_eq!(
        lines_of(b"0123456789abc\nnext\n0123456789", 4).await,
        [("0123", true), ("next", false), ("0123", true)].map(|(l, c)| (l.to_owned(), c))
    );
    assert!(lines_of(b"", 4).await.is_empty());
}
