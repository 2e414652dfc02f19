module reservationstore/adapter

go 1.19
