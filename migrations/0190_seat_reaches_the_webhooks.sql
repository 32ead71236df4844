-- The seat goes with its ticket to the outgoing webhooks (docs/design.md,
-- "Reserved seating"; docs/integrations.md): a ticket admitted at the door
-- (`code.redeemed`) names its seat, as the door's answer does ("C-12";
-- null for a ticket without a seat), beside the order's lines, which name
-- theirs (`seats`, migration 0180).
create or replace function hf_webhook_code_redeemed() returns trigger
language plpgsql as $$
begin
    perform hf_webhook_event('code.redeemed', jsonb_build_object(
        'code', new.code,
        'kind', new.kind,
        'order_id', new.order_id,
        'order_token', (select token from orders where id = new.order_id),
        'redeemed_at', new.redeemed_at,
        'redeemed_by', new.redeemed_by,
        'place', new.place,
        'seat', (select s.label from order_codes c join seats s on s.id = c.seat_id
                  where c.code = new.code)));
    return null;
end;
$$;
