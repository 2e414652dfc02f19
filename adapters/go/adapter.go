// The adapter: the driver protocol (PROTOCOL.md) around the store of store.go.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"sync"
)

func main() {
	var stores sync.Map // store id -> *Store
	var out sync.Mutex
	encoder := json.NewEncoder(os.Stdout) // one line per Encode
	write := func(id any, result any, err error) {
		answer := map[string]any{"id": id, "ok": result}
		if inv, ok := err.(Invalid); ok {
			answer = map[string]any{"id": id, "error": map[string]any{
				"kind": "InvalidArgument", "name": inv.Name, "message": inv.Name}}
		} else if err != nil {
			answer = map[string]any{"id": id, "error": map[string]any{
				"kind": "StorageError", "indeterminate": false, "message": err.Error()}}
		}
		out.Lock()
		defer out.Unlock()
		encoder.Encode(answer)
	}
	lines := bufio.NewScanner(os.Stdin)
	lines.Buffer(make([]byte, 1<<20), 1<<20)
	var running sync.WaitGroup
	for lines.Scan() {
		decoder := json.NewDecoder(bytes.NewReader(lines.Bytes()))
		decoder.UseNumber() // integers up to 2^64-1, exactly (D8)
		var r map[string]any
		if decoder.Decode(&r) != nil {
			continue
		}
		switch r["op"] {
		case "hello":
			write(r["id"], map[string]any{"protocol": 1, "durable": false}, nil)
		case "open": // in order: later requests name the store
			stores.Store(r["store"], NewStore())
			write(r["id"], nil, nil)
		case "close": // in order too: the driver sends it once the store is done with
			stores.Delete(r["store"])
			write(r["id"], nil, nil)
		default: // concurrently: answers may go out in any order
			running.Add(1)
			go func() {
				defer running.Done()
				s, ok := stores.Load(r["store"])
				if !ok {
					write(r["id"], nil, Invalid{"Unrepresentable"})
					return
				}
				result, err := s.(*Store).Run(r)
				write(r["id"], result, err)
			}()
		}
	}
	running.Wait()
}
