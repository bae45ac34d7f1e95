//! Errors of the canonical codec and of wire-message conversion.

/// Why canonical bytes were rejected.
///
/// Every rule of the canonical TLV codec (see [`crate::codec`]) has its own
/// variant, so two nodes rejecting the same bytes report the same reason. The
/// stable name of a variant is [`DecodeError::code`]; golden vectors name
/// expected errors by it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The input ends inside a varint, a field header or a field value.
    #[error("input truncated")]
    Truncated,
    /// A LEB128 varint does not fit in 64 bits.
    #[error("varint overflows 64 bits")]
    VarintOverflow,
    /// A LEB128 varint has a redundant trailing zero group.
    #[error("varint is not minimally encoded")]
    NonMinimalVarint,
    /// A field tag is lower than the tag before it.
    #[error("tag {found} follows tag {previous}: tags must be strictly ascending")]
    NonAscendingTag {
        /// The tag before.
        previous: u64,
        /// The offending tag.
        found: u64,
    },
    /// The same tag appears twice in a row.
    #[error("duplicate tag {tag}")]
    DuplicateTag {
        /// The repeated tag.
        tag: u64,
    },
    /// A tag that the type does not define.
    #[error("unknown tag {tag}")]
    UnknownTag {
        /// The unknown tag.
        tag: u64,
    },
    /// A required field is absent.
    #[error("missing required field with tag {tag}")]
    MissingField {
        /// The absent field's tag.
        tag: u64,
    },
    /// A length prefix or a whole document exceeds its documented maximum.
    #[error("length {len} exceeds the maximum {max}")]
    LengthTooLarge {
        /// The declared length.
        len: u64,
        /// The maximum allowed.
        max: u64,
    },
    /// A list has more items than allowed.
    #[error("list of {count} items exceeds the maximum {max}")]
    ListTooLong {
        /// The declared count.
        count: u64,
        /// The maximum allowed.
        max: u64,
    },
    /// Bytes remain after the last item of a list.
    #[error("trailing bytes after the last list item in field {tag}")]
    TrailingBytes {
        /// The list field's tag.
        tag: u64,
    },
    /// An unsigned integer has a leading zero byte (zero must be the empty value).
    #[error("integer in field {tag} is not minimally encoded")]
    NonMinimalInteger {
        /// The field's tag.
        tag: u64,
    },
    /// An unsigned integer is wider than its type.
    #[error("integer in field {tag} is wider than {max_bytes} bytes")]
    IntegerOverflow {
        /// The field's tag.
        tag: u64,
        /// The widest accepted encoding.
        max_bytes: usize,
    },
    /// A fixed-size field (hash, address) has the wrong length.
    #[error("field {tag} has length {found}, expected {expected}")]
    InvalidFixedLength {
        /// The field's tag.
        tag: u64,
        /// The required length.
        expected: usize,
        /// The actual length.
        found: usize,
    },
    /// The protocol version field holds a version this codec does not speak.
    #[error("unsupported protocol version {found} (this codec speaks {supported})")]
    UnsupportedVersion {
        /// The version found.
        found: u64,
        /// The only version supported.
        supported: u64,
    },
    /// An enumeration field holds an undefined value.
    #[error("field {tag} holds undefined enum value {value}")]
    UnknownVariant {
        /// The field's tag.
        tag: u64,
        /// The undefined value.
        value: u64,
    },
    /// A union holds no variant.
    #[error("union holds no variant")]
    EmptyUnion,
    /// A union holds more than one variant.
    #[error("union holds more than one variant")]
    MultipleUnionVariants,
    /// A text field is not valid UTF-8.
    #[error("field {tag} is not valid UTF-8")]
    InvalidUtf8 {
        /// The field's tag.
        tag: u64,
    },
    /// A list that must not be empty is empty.
    #[error("list in field {tag} must not be empty")]
    EmptyList {
        /// The list field's tag.
        tag: u64,
    },
    /// A bounds check with `min > max`, which no state can satisfy.
    #[error("check {index} has min > max")]
    InvertedBounds {
        /// Index of the check in its list.
        index: usize,
    },
    /// A delivery names more than one replay witness.
    #[error("delivery has more than one witness attachment")]
    DuplicateWitness,
    /// A witness is not in canonical shape (order, duplicates, storage of an absent account).
    #[error("invalid witness: {reason}")]
    InvalidWitness {
        /// What is wrong.
        reason: &'static str,
    },
    /// An envelope's traceHash is not the hash of the replay record its fields define.
    #[error("traceHash does not commit to the envelope's replay record")]
    InconsistentTraceHash,
}

impl DecodeError {
    /// The stable name of this error, as used by golden vectors and metrics.
    pub const fn code(&self) -> &'static str {
        match self {
            Self::Truncated => "Truncated",
            Self::VarintOverflow => "VarintOverflow",
            Self::NonMinimalVarint => "NonMinimalVarint",
            Self::NonAscendingTag { .. } => "NonAscendingTag",
            Self::DuplicateTag { .. } => "DuplicateTag",
            Self::UnknownTag { .. } => "UnknownTag",
            Self::MissingField { .. } => "MissingField",
            Self::LengthTooLarge { .. } => "LengthTooLarge",
            Self::ListTooLong { .. } => "ListTooLong",
            Self::TrailingBytes { .. } => "TrailingBytes",
            Self::NonMinimalInteger { .. } => "NonMinimalInteger",
            Self::IntegerOverflow { .. } => "IntegerOverflow",
            Self::InvalidFixedLength { .. } => "InvalidFixedLength",
            Self::UnsupportedVersion { .. } => "UnsupportedVersion",
            Self::UnknownVariant { .. } => "UnknownVariant",
            Self::EmptyUnion => "EmptyUnion",
            Self::MultipleUnionVariants => "MultipleUnionVariants",
            Self::InvalidUtf8 { .. } => "InvalidUtf8",
            Self::EmptyList { .. } => "EmptyList",
            Self::InvertedBounds { .. } => "InvertedBounds",
            Self::DuplicateWitness => "DuplicateWitness",
            Self::InvalidWitness { .. } => "InvalidWitness",
            Self::InconsistentTraceHash => "InconsistentTraceHash",
        }
    }
}

/// Why committed content was rejected before or while parsing it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CommittedError {
    /// The bytes do not hash to the commitment; they were not parsed.
    #[error("content hash mismatch for {type_tag}: expected {expected}, computed {computed}")]
    HashMismatch {
        /// The type tag the bytes were hashed under.
        type_tag: &'static str,
        /// The committed hash.
        expected: crate::ContentHash,
        /// The hash of the bytes received.
        computed: crate::ContentHash,
    },
    /// The bytes match the commitment but are not a canonical encoding.
    #[error("committed {type_tag} is not canonical: {source}")]
    Decode {
        /// The type tag.
        type_tag: &'static str,
        /// The codec rule that failed.
        #[source]
        source: DecodeError,
    },
}

/// Why a wire (protobuf) message was rejected.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WireError {
    /// The message is larger than its documented maximum; it was not decoded.
    #[error("{message} of {len} bytes exceeds the maximum {max}")]
    TooLarge {
        /// Message name.
        message: &'static str,
        /// Its size.
        len: usize,
        /// The maximum.
        max: usize,
    },
    /// protobuf decoding failed.
    #[error("malformed {message}: {reason}")]
    Malformed {
        /// Message name.
        message: &'static str,
        /// prost's description.
        reason: String,
    },
    /// A required sub-message is absent.
    #[error("{message}.{field} is missing")]
    MissingField {
        /// Message name.
        message: &'static str,
        /// Field name.
        field: &'static str,
    },
    /// A bytes field has the wrong length.
    #[error("{message}.{field} has {found} bytes, expected {expected}")]
    InvalidLength {
        /// Message name.
        message: &'static str,
        /// Field name.
        field: &'static str,
        /// Required length.
        expected: usize,
        /// Actual length.
        found: usize,
    },
    /// A numeric field is out of its allowed range.
    #[error("{message}.{field} is out of range: {reason}")]
    OutOfRange {
        /// Message name.
        message: &'static str,
        /// Field name.
        field: &'static str,
        /// What is wrong.
        reason: &'static str,
    },
    /// A list of signer indices is not strictly ascending.
    #[error("{message}.{field} must be strictly ascending")]
    NotAscending {
        /// Message name.
        message: &'static str,
        /// Field name.
        field: &'static str,
    },
    /// The bytes decode, but are not the message's canonical protobuf
    /// encoding (fields out of order, repeated, unknown, defaults written,
    /// non-minimal varints or lengths): every message has exactly one
    /// accepted encoding, so byte-different copies cannot pass as new messages.
    #[error("{message} is not canonically encoded")]
    NonCanonical {
        /// Message name.
        message: &'static str,
    },
    /// The two halves of conflict evidence do not conflict.
    #[error("conflict evidence does not conflict: {reason}")]
    NotAConflict {
        /// What is wrong.
        reason: &'static str,
    },
}

impl WireError {
    /// The stable name of this error, for metrics and peer-scoring logs.
    pub const fn code(&self) -> &'static str {
        match self {
            Self::TooLarge { .. } => "TooLarge",
            Self::Malformed { .. } => "Malformed",
            Self::MissingField { .. } => "MissingField",
            Self::InvalidLength { .. } => "InvalidLength",
            Self::OutOfRange { .. } => "OutOfRange",
            Self::NotAscending { .. } => "NotAscending",
            Self::NotAConflict { .. } => "NotAConflict",
            Self::NonCanonical { .. } => "NonCanonical",
        }
    }
}
