package memcachedriver

// ItemKeys exports itemKeys to the tests of package memcachedriver_test.
var ItemKeys = itemKeys
