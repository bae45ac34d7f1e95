//! The canonical TLV codec.
//!
//! # Grammar
//!
//! ```text
//! document := field*                                  (at most MAX_DOCUMENT_LEN bytes)
//! field    := tag:varint  len:varint  value[len]      (tags strictly ascending)
//! varint   := unsigned LEB128, minimal, at most 64 bits
//! list     := count:varint ( len:varint item[len] ){count}   (items: structs or raw bytes)
//! ```
//!
//! Field values, by kind (one canonical form each):
//! - **unsigned integer**: minimal big-endian bytes, zero is the empty value; a
//!   leading zero byte is `NonMinimalInteger`, a value wider than the type
//!   (8 bytes for `u64`, 32 for `U256`) is `IntegerOverflow`.
//! - **enum**: an unsigned integer with a defined set of values (`UnknownVariant`).
//! - **fixed bytes** (hash, address): exactly that many bytes.
//! - **bytes / text**: raw; text must be UTF-8.
//! - **nested struct**: the struct's own canonical document.
//! - **union** (e.g. a predicate): a document holding exactly one field whose tag
//!   names the variant and whose value is the variant's struct.
//! - **list**: the `list` production above; items are nested structs in the
//!   order the author gave them (order is meaningful and committed). The empty
//!   list is the single byte `0x00`.
//! - **optional field**: absent when `None`; when `Some`, present even if its value
//!   is empty. Required fields are always present, even when empty (zero).
//!
//! Tags start at 1. A decoder first checks the framing of the whole document
//! (varints, ascending tags, lengths), then interprets the fields in tag order;
//! any field the type does not define is `UnknownTag`.

use crate::DecodeError;
use alloy_primitives::{Address, B256, U256};

/// Largest canonical document (and so largest single field) accepted: 16 MiB.
pub const MAX_DOCUMENT_LEN: usize = 16 * 1024 * 1024;
/// Largest number of items in one list.
pub const MAX_LIST_ITEMS: u64 = 65_536;
/// The protocol version every top-level content type carries in tag 1.
pub const PROTOCOL_VERSION: u64 = 1;

/// A type with exactly one canonical byte encoding.
pub trait Canonical: Sized {
    /// Appends this value's fields, in ascending tag order.
    fn encode_fields(&self, w: &mut Writer);

    /// Reads this value from a framed document.
    fn decode_fields(r: &mut Reader<'_>) -> Result<Self, DecodeError>;

    /// The canonical bytes of this value.
    fn to_canonical_bytes(&self) -> Vec<u8> {
        let mut w = Writer::default();
        self.encode_fields(&mut w);
        w.into_bytes()
    }

    /// Parses canonical bytes, rejecting every non-canonical form.
    fn from_canonical_bytes(bytes: &[u8]) -> Result<Self, DecodeError> {
        if bytes.len() > MAX_DOCUMENT_LEN {
            return Err(DecodeError::LengthTooLarge {
                len: bytes.len() as u64,
                max: MAX_DOCUMENT_LEN as u64,
            });
        }
        let mut r = Reader::new(bytes)?;
        let value = Self::decode_fields(&mut r)?;
        r.finish()?;
        Ok(value)
    }
}

/// Appends a minimal unsigned LEB128 varint.
pub fn write_varint(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// Reads a minimal unsigned LEB128 varint from the front of `input`, returning
/// the value and the number of bytes it took.
pub fn read_varint(input: &[u8]) -> Result<(u64, usize), DecodeError> {
    let mut value: u64 = 0;
    for (i, &byte) in input.iter().enumerate() {
        // 64 bits = 9 groups of 7 plus one bit in the tenth byte.
        if i == 9 && byte > 1 {
            return Err(DecodeError::VarintOverflow);
        }
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            if byte == 0 && i > 0 {
                return Err(DecodeError::NonMinimalVarint);
            }
            return Ok((value, i + 1));
        }
    }
    Err(DecodeError::Truncated)
}

/// Builds a canonical document field by field.
#[derive(Debug, Default)]
pub struct Writer {
    buf: Vec<u8>,
    last_tag: u64,
}

impl Writer {
    /// The finished document.
    pub fn into_bytes(self) -> Vec<u8> {
        self.buf
    }

    /// Appends a field with a raw value.
    pub fn bytes(&mut self, tag: u64, value: &[u8]) {
        // Encoders are written by us with literal tags; an out-of-order tag is a
        // programming error, not bad input.
        assert!(tag > self.last_tag, "canonical encoder wrote tag {tag} after {}", self.last_tag);
        self.last_tag = tag;
        write_varint(&mut self.buf, tag);
        write_varint(&mut self.buf, value.len() as u64);
        self.buf.extend_from_slice(value);
    }

    /// Appends an unsigned integer field (minimal big-endian).
    pub fn uint(&mut self, tag: u64, v: u64) {
        let be = v.to_be_bytes();
        let skip = be.iter().take_while(|b| **b == 0).count();
        self.bytes(tag, &be[skip..]);
    }

    /// Appends a 256-bit unsigned integer field (minimal big-endian).
    pub fn u256(&mut self, tag: u64, v: &U256) {
        let be = v.to_be_bytes::<32>();
        let skip = be.iter().take_while(|b| **b == 0).count();
        self.bytes(tag, &be[skip..]);
    }

    /// Appends a 32-byte field.
    pub fn b256(&mut self, tag: u64, v: &B256) {
        self.bytes(tag, v.as_slice());
    }

    /// Appends a 20-byte address field.
    pub fn address(&mut self, tag: u64, v: &Address) {
        self.bytes(tag, v.as_slice());
    }

    /// Appends a UTF-8 text field.
    pub fn text(&mut self, tag: u64, v: &str) {
        self.bytes(tag, v.as_bytes());
    }

    /// Appends a nested struct field.
    pub fn nested<T: Canonical>(&mut self, tag: u64, v: &T) {
        self.bytes(tag, &v.to_canonical_bytes());
    }

    /// Appends a list field of nested structs.
    pub fn list<T: Canonical>(&mut self, tag: u64, items: &[T]) {
        let encoded: Vec<Vec<u8>> = items.iter().map(Canonical::to_canonical_bytes).collect();
        self.list_framed(tag, encoded.iter().map(Vec::as_slice));
    }

    /// Appends a list field of raw byte strings (e.g. trie proof nodes).
    pub fn bytes_list<B: AsRef<[u8]>>(&mut self, tag: u64, items: &[B]) {
        self.list_framed(tag, items.iter().map(AsRef::as_ref));
    }

    fn list_framed<'a>(&mut self, tag: u64, items: impl ExactSizeIterator<Item = &'a [u8]>) {
        let mut value = Vec::new();
        write_varint(&mut value, items.len() as u64);
        for item in items {
            write_varint(&mut value, item.len() as u64);
            value.extend_from_slice(item);
        }
        self.bytes(tag, &value);
    }
}

/// A framed document: fields whose framing has been checked, read in tag order.
#[derive(Debug)]
pub struct Reader<'a> {
    fields: Vec<(u64, &'a [u8])>,
    next: usize,
}

impl<'a> Reader<'a> {
    /// Checks the framing of a whole document: minimal varints, strictly
    /// ascending tags, lengths within bounds and within the input.
    pub fn new(input: &'a [u8]) -> Result<Self, DecodeError> {
        let mut fields = Vec::new();
        let mut rest = input;
        let mut previous: Option<u64> = None;
        while !rest.is_empty() {
            let (tag, n) = read_varint(rest)?;
            rest = &rest[n..];
            match previous {
                Some(p) if tag == p => return Err(DecodeError::DuplicateTag { tag }),
                Some(p) if tag < p => {
                    return Err(DecodeError::NonAscendingTag { previous: p, found: tag })
                }
                _ => {}
            }
            previous = Some(tag);
            let (len, n) = read_varint(rest)?;
            rest = &rest[n..];
            if len > MAX_DOCUMENT_LEN as u64 {
                return Err(DecodeError::LengthTooLarge { len, max: MAX_DOCUMENT_LEN as u64 });
            }
            let len = len as usize;
            if len > rest.len() {
                return Err(DecodeError::Truncated);
            }
            let (value, tail) = rest.split_at(len);
            fields.push((tag, value));
            rest = tail;
        }
        Ok(Self { fields, next: 0 })
    }

    /// Takes the field with `tag` if it is the next one.
    ///
    /// Fields are requested in ascending tag order, so a next field with a lower
    /// tag was never requested: it is unknown to the type.
    pub fn optional(&mut self, tag: u64) -> Result<Option<&'a [u8]>, DecodeError> {
        match self.fields.get(self.next) {
            Some(&(t, _)) if t < tag => Err(DecodeError::UnknownTag { tag: t }),
            Some(&(t, value)) if t == tag => {
                self.next += 1;
                Ok(Some(value))
            }
            _ => Ok(None),
        }
    }

    /// Takes the field with `tag`, which must be present.
    pub fn required(&mut self, tag: u64) -> Result<&'a [u8], DecodeError> {
        self.optional(tag)?.ok_or(DecodeError::MissingField { tag })
    }

    /// Fails if any field was not consumed.
    pub fn finish(&self) -> Result<(), DecodeError> {
        match self.fields.get(self.next) {
            Some(&(tag, _)) => Err(DecodeError::UnknownTag { tag }),
            None => Ok(()),
        }
    }

    /// Reads the sole field of a union document: `(variant tag, value)`.
    pub fn union(&mut self) -> Result<(u64, &'a [u8]), DecodeError> {
        match self.fields.as_slice() {
            [] => Err(DecodeError::EmptyUnion),
            [(tag, value)] => {
                self.next = 1;
                Ok((*tag, value))
            }
            _ => Err(DecodeError::MultipleUnionVariants),
        }
    }

    /// A required `u64` field.
    pub fn uint(&mut self, tag: u64) -> Result<u64, DecodeError> {
        decode_u64(tag, self.required(tag)?)
    }

    /// An optional `u64` field.
    pub fn opt_uint(&mut self, tag: u64) -> Result<Option<u64>, DecodeError> {
        self.optional(tag)?.map(|v| decode_u64(tag, v)).transpose()
    }

    /// The protocol version field (tag 1), which must equal [`PROTOCOL_VERSION`].
    pub fn version(&mut self) -> Result<(), DecodeError> {
        match self.uint(1)? {
            PROTOCOL_VERSION => Ok(()),
            found => Err(DecodeError::UnsupportedVersion { found, supported: PROTOCOL_VERSION }),
        }
    }

    /// A required 256-bit unsigned integer field.
    pub fn u256(&mut self, tag: u64) -> Result<U256, DecodeError> {
        let v = self.required(tag)?;
        check_minimal(tag, v, 32)?;
        Ok(U256::from_be_slice(v))
    }

    /// A required 32-byte field.
    pub fn b256(&mut self, tag: u64) -> Result<B256, DecodeError> {
        Ok(B256::from(fixed::<32>(tag, self.required(tag)?)?))
    }

    /// A required 20-byte address field.
    pub fn address(&mut self, tag: u64) -> Result<Address, DecodeError> {
        Ok(Address::from(fixed::<20>(tag, self.required(tag)?)?))
    }

    /// A required raw bytes field.
    pub fn bytes(&mut self, tag: u64) -> Result<Vec<u8>, DecodeError> {
        Ok(self.required(tag)?.to_vec())
    }

    /// An optional raw bytes field.
    pub fn opt_bytes(&mut self, tag: u64) -> Result<Option<Vec<u8>>, DecodeError> {
        Ok(self.optional(tag)?.map(<[u8]>::to_vec))
    }

    /// An optional UTF-8 text field of at most `max` bytes.
    pub fn opt_text(&mut self, tag: u64, max: usize) -> Result<Option<String>, DecodeError> {
        let Some(v) = self.optional(tag)? else { return Ok(None) };
        if v.len() > max {
            return Err(DecodeError::LengthTooLarge { len: v.len() as u64, max: max as u64 });
        }
        let s = std::str::from_utf8(v).map_err(|_| DecodeError::InvalidUtf8 { tag })?;
        Ok(Some(s.to_owned()))
    }

    /// A required nested struct field.
    pub fn nested<T: Canonical>(&mut self, tag: u64) -> Result<T, DecodeError> {
        T::from_canonical_bytes(self.required(tag)?)
    }

    /// A required list field of nested structs.
    pub fn list<T: Canonical>(&mut self, tag: u64) -> Result<Vec<T>, DecodeError> {
        self.list_framed(tag)?.into_iter().map(T::from_canonical_bytes).collect()
    }

    /// A required list field of raw byte strings.
    pub fn bytes_list(&mut self, tag: u64) -> Result<Vec<Vec<u8>>, DecodeError> {
        Ok(self.list_framed(tag)?.into_iter().map(<[u8]>::to_vec).collect())
    }

    /// The items of a list field, framing checked, not yet decoded.
    fn list_framed(&mut self, tag: u64) -> Result<Vec<&'a [u8]>, DecodeError> {
        let v = self.required(tag)?;
        let (count, n) = read_varint(v)?;
        if count > MAX_LIST_ITEMS {
            return Err(DecodeError::ListTooLong { count, max: MAX_LIST_ITEMS });
        }
        let mut rest = &v[n..];
        // Every item takes at least one byte (its length), which bounds the
        // allocation by the input size whatever the declared count.
        let mut items = Vec::with_capacity((count as usize).min(rest.len()));
        for _ in 0..count {
            let (len, n) = read_varint(rest)?;
            rest = &rest[n..];
            let len = usize::try_from(len).map_err(|_| DecodeError::Truncated)?;
            if len > rest.len() {
                return Err(DecodeError::Truncated);
            }
            let (item, tail) = rest.split_at(len);
            items.push(item);
            rest = tail;
        }
        if !rest.is_empty() {
            return Err(DecodeError::TrailingBytes { tag });
        }
        Ok(items)
    }
}

fn check_minimal(tag: u64, v: &[u8], max_bytes: usize) -> Result<(), DecodeError> {
    if v.first() == Some(&0) {
        return Err(DecodeError::NonMinimalInteger { tag });
    }
    if v.len() > max_bytes {
        return Err(DecodeError::IntegerOverflow { tag, max_bytes });
    }
    Ok(())
}

fn decode_u64(tag: u64, v: &[u8]) -> Result<u64, DecodeError> {
    check_minimal(tag, v, 8)?;
    Ok(v.iter().fold(0u64, |acc, b| (acc << 8) | u64::from(*b)))
}

fn fixed<const N: usize>(tag: u64, v: &[u8]) -> Result<[u8; N], DecodeError> {
    v.try_into().map_err(|_| DecodeError::InvalidFixedLength { tag, expected: N, found: v.len() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn varint_known_values() {
        for (v, bytes) in [
            (0u64, &[0x00][..]),
            (1, &[0x01]),
            (127, &[0x7f]),
            (128, &[0x80, 0x01]),
            (300, &[0xac, 0x02]),
            (u64::MAX, &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]),
        ] {
            let mut out = Vec::new();
            write_varint(&mut out, v);
            assert_eq!(out, bytes, "encode {v}");
            assert_eq!(read_varint(bytes), Ok((v, bytes.len())), "decode {v}");
        }
    }

    #[test]
    fn varint_rejects_non_canonical() {
        assert_eq!(read_varint(&[0x80, 0x00]), Err(DecodeError::NonMinimalVarint));
        assert_eq!(read_varint(&[0x81, 0x80, 0x00]), Err(DecodeError::NonMinimalVarint));
        assert_eq!(read_varint(&[0x80]), Err(DecodeError::Truncated));
        assert_eq!(read_varint(&[]), Err(DecodeError::Truncated));
        let mut over = [0xff; 10];
        over[9] = 0x02;
        assert_eq!(read_varint(&over), Err(DecodeError::VarintOverflow));
        assert_eq!(read_varint(&[0xff; 11]), Err(DecodeError::VarintOverflow));
    }

    #[test]
    fn integers_are_minimal_big_endian() {
        let mut w = Writer::default();
        w.uint(1, 0);
        w.uint(2, 0x0102);
        w.u256(3, &U256::from(0x80u64));
        assert_eq!(w.into_bytes(), [0x01, 0x00, 0x02, 0x02, 0x01, 0x02, 0x03, 0x01, 0x80]);

        let mut r = Reader::new(&[0x01, 0x02, 0x00, 0x01]).unwrap();
        assert_eq!(r.uint(1), Err(DecodeError::NonMinimalInteger { tag: 1 }));
        let mut r = Reader::new(&[0x01, 0x09, 1, 2, 3, 4, 5, 6, 7, 8, 9]).unwrap();
        assert_eq!(r.uint(1), Err(DecodeError::IntegerOverflow { tag: 1, max_bytes: 8 }));
    }

    #[test]
    fn framing_rules() {
        assert_eq!(
            Reader::new(&[0x02, 0x00, 0x01, 0x00]).unwrap_err(),
            DecodeError::NonAscendingTag { previous: 2, found: 1 }
        );
        assert_eq!(
            Reader::new(&[0x02, 0x00, 0x02, 0x00]).unwrap_err(),
            DecodeError::DuplicateTag { tag: 2 }
        );
        assert_eq!(Reader::new(&[0x01, 0x02, 0x00]).unwrap_err(), DecodeError::Truncated);
        assert_eq!(Reader::new(&[0x01]).unwrap_err(), DecodeError::Truncated);
        // A length over the maximum is reported as such, before the truncation.
        let mut big = vec![0x01];
        write_varint(&mut big, MAX_DOCUMENT_LEN as u64 + 1);
        assert!(matches!(Reader::new(&big).unwrap_err(), DecodeError::LengthTooLarge { .. }));
    }

    #[test]
    fn unknown_and_missing_fields() {
        // Fields 1 and 3 present; a type that knows 2 and 3.
        let doc = [0x01, 0x00, 0x03, 0x00];
        let mut r = Reader::new(&doc).unwrap();
        assert_eq!(r.optional(2), Err(DecodeError::UnknownTag { tag: 1 }));
        // A type that knows only 1 leaves 3 unconsumed.
        let mut r = Reader::new(&doc).unwrap();
        r.required(1).unwrap();
        assert_eq!(r.finish(), Err(DecodeError::UnknownTag { tag: 3 }));
        // A type that requires 2.
        let mut r = Reader::new(&doc).unwrap();
        r.required(1).unwrap();
        assert_eq!(r.required(2), Err(DecodeError::MissingField { tag: 2 }));
    }

    proptest! {
        #[test]
        fn varint_roundtrip(v in any::<u64>()) {
            let mut out = Vec::new();
            write_varint(&mut out, v);
            prop_assert_eq!(read_varint(&out), Ok((v, out.len())));
        }

        #[test]
        fn uint_roundtrip(v in any::<u64>(), w in any::<[u8; 32]>()) {
            let w = U256::from_be_bytes(w);
            let mut wr = Writer::default();
            wr.uint(1, v);
            wr.u256(2, &w);
            let bytes = wr.into_bytes();
            let mut r = Reader::new(&bytes).unwrap();
            prop_assert_eq!(r.uint(1), Ok(v));
            prop_assert_eq!(r.u256(2), Ok(w));
            prop_assert!(r.finish().is_ok());
        }

        #[test]
        fn reader_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = Reader::new(&bytes);
        }
    }
}
