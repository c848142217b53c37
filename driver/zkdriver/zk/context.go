package zk

import "context"

// requestContext is request that also returns ctx's error once ctx is
// done. The request stays queued or in flight: its reply, if any, goes to
// the buffered channel nobody reads, and a watch it sets is registered as
// if the caller had waited. Requests with context.Background() are
// request's.
func (c *Conn) requestContext(ctx context.Context, opcode int32, req interface{}, res interface{}, recvFunc func(*request, *responseHeader, error)) (int64, error) {
	if ctx.Done() == nil {
		return c.request(opcode, req, res, recvFunc)
	}
	if err := ctx.Err(); err != nil {
		return -1, err
	}
	recv := c.queueRequest(opcode, req, res, recvFunc)
	select {
	case r := <-recv:
		return r.zxid, r.err
	case <-c.shouldQuit:
		return -1, ErrConnectionClosed // as request
	case <-ctx.Done():
		select {
		case r := <-recv: // answered meanwhile
			return r.zxid, r.err
		default:
		}
		return -1, ctx.Err()
	}
}

// abandoned reports whether err says that the request's reply was not
// waited for (the connection closed, or ctx done): its response struct
// may still be written and must not be read.
func abandoned(ctx context.Context, err error) bool {
	return err == ErrConnectionClosed || err != nil && err == ctx.Err()
}
