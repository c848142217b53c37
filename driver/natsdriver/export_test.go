package natsdriver

// EncodeKey and DecodeKey expose the key encoding to the tests.
var (
	EncodeKey = encodeKey
	DecodeKey = decodeKey
)
